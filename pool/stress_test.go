package pool_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// TestStatsInvariantsConcurrent: 8 goroutines send 500 requests in all on
// a pool capped at 4 connections, closing a seeded random fifth of the
// bodies early (which closes their connections), while another goroutine
// checks the invariants throughout.
func TestStatsInvariantsConcurrent(t *testing.T) {
	const (
		workers  = 8
		requests = 500
		maxConns = 4
	)
	body := strings.Repeat("x", 64<<10) // large enough that an early close cannot have read it all
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, body)
	}))
	p := newPool(t, pool.MaxConnsPerHost(maxConns), pool.MaxIdleConnsPerHost(maxConns))

	// The sampler checks the invariants after every change of the pool's
	// state until the workers are done (bounded by the changes the
	// requests make, and by ctx).
	ctx, stop := context.WithCancel(bounded(t))
	samplerDone := make(chan error, 1)
	var samples int
	go func() {
		defer close(samplerDone)
		var bad error
		p.WaitFor(ctx, func(s pool.Stats) bool {
			samples++
			bad = s.Check()
			return bad != nil
		})
		samplerDone <- bad
	}()

	work := make(chan int, requests)
	for i := range requests {
		work <- i
	}
	close(work)
	var (
		wg          sync.WaitGroup
		earlyCloses atomic.Int64
	)
	errs := make(chan error, workers)
	for w := range workers {
		rng := rand.New(rand.NewPCG(42, uint64(w)))
		wg.Go(func() {
			for range work {
				early := rng.IntN(5) == 0
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := p.Client().Do(req)
				if err != nil {
					errs <- err
					return
				}
				if early {
					earlyCloses.Add(1)
					_, err = io.ReadFull(resp.Body, make([]byte, 10))
				} else {
					_, err = io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	quiesce(t, p)
	stop()
	require.NoError(t, <-samplerDone, "invariant broken while running")
	t.Logf("%d samples", samples)

	s := p.Stats()
	require.NoError(t, s.Check())
	require.EqualValues(t, requests, s.Requests)
	require.LessOrEqual(t, s.MaxOpen, maxConns)
	require.Zero(t, s.InFlight)
	require.Zero(t, s.OpenBodies)
	require.Zero(t, s.Active)
	require.Zero(t, s.Waiting)
	require.Zero(t, s.DialErrors)
	// Every early close closed its connection. Under load the Transport
	// may also give up a healthy connection (client-close, see
	// requestCloseReason); nothing else closes one here.
	require.Equal(t, earlyCloses.Load(), s.ClosedBy[vocab.ReasonEarlyBodyClose], "closed by: %v", s.ClosedBy)
	require.Equal(t, s.Closed, s.ClosedBy[vocab.ReasonEarlyBodyClose]+s.ClosedBy[vocab.ReasonClient], "closed by: %v", s.ClosedBy)
	require.Equal(t, s.Dials, s.Closed+int64(s.Open))
	require.Positive(t, s.Closed)
	require.NoError(t, p.Check(bounded(t)))

	// The server accepted exactly the connections the pool dialed.
	require.NoError(t, srv.accepted.WaitAtLeast(bounded(t), s.Dials))
	require.Equal(t, s.Dials, srv.accepted.Load())

	hs := p.HostStats()
	require.Len(t, hs, 1)
	for _, h := range hs {
		require.Equal(t, s.Dials, h.Dials)
		require.Equal(t, s.Requests, h.Requests)
		require.NoError(t, h.Check())
	}
}

func TestStatsCheck(t *testing.T) {
	ok := pool.Stats{Dials: 5, Open: 2, Active: 1, Idle: 1, Closed: 1, DialErrors: 1, Dialing: 1,
		ClosedBy: map[pool.CloseReason]int64{vocab.ReasonCloseIdle: 1}, ClosedByClient: 1}
	require.NoError(t, ok.Check())
	for name, edit := range map[string]func(*pool.Stats){
		"dials":     func(s *pool.Stats) { s.Dials++ },
		"open":      func(s *pool.Stats) { s.Idle++ },
		"negative":  func(s *pool.Stats) { s.Waiting = -1 },
		"by reason": func(s *pool.Stats) { s.ClosedBy = nil },
		"by side":   func(s *pool.Stats) { s.ClosedByServer++ },
	} {
		s := ok
		s.ClosedBy = map[pool.CloseReason]int64{vocab.ReasonCloseIdle: 1}
		edit(&s)
		require.Error(t, s.Check(), name)
	}
}
