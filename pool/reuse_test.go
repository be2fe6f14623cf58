package pool_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

func TestReuseSequential(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	for range 10 {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	quiesce(t, p)

	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, 10, s.Requests)
	require.EqualValues(t, 9, s.ReusedRequests)
	require.Equal(t, 1, s.Open)
	require.Equal(t, 1, s.Idle)
	require.Equal(t, 0, s.InFlight)
	require.Equal(t, 0, s.OpenBodies)
	require.EqualValues(t, 1, srv.accepted.Load())

	c := onlyConn(t, p)
	require.Equal(t, vocab.StateIdle, c.State)
	require.Equal(t, 10, c.Requests)
	require.Len(t, c.RequestIDs, 10)
	require.Equal(t, "HTTP/1.1", c.Proto)
	require.Positive(t, c.BytesRead)
	require.Positive(t, c.BytesWritten)
	require.Equal(t, srv.Listener.Addr().String(), c.Host)

	hs := p.HostStats()
	require.Len(t, hs, 1)
	require.EqualValues(t, 10, hs[c.Host].Requests)
}

func TestEarlyBodyClose(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, big)
	}))
	p := newPool(t)

	resp := open(t, p, bounded(t), srv.URL)
	buf := make([]byte, 10)
	_, err := io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	quiesce(t, p) // the Transport closes the connection after Close returned

	cs := p.Conns()
	require.Len(t, cs, 1)
	require.Equal(t, vocab.StateClosed, cs[0].State)
	require.Equal(t, vocab.ClosedByClient, cs[0].ClosedBy)
	require.Equal(t, vocab.ReasonEarlyBodyClose, cs[0].CloseReason)
	require.Empty(t, cs[0].CloseDetail)

	require.Len(t, get(t, p, srv.URL), len(big))
	quiesce(t, p)
	s := p.Stats()
	require.EqualValues(t, 2, s.Dials)
	require.EqualValues(t, 1, s.Closed)
	require.EqualValues(t, 1, s.ClosedBy[vocab.ReasonEarlyBodyClose])
	require.EqualValues(t, 1, s.ClosedByClient)
	require.EqualValues(t, 0, s.ReusedRequests)
}

func TestBodyReadToEOFNotClosed(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)

	first := open(t, p, bounded(t), srv.URL)
	b, err := io.ReadAll(first.Body)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	// Not closed: the Transport put the connection back at EOF already.

	require.Equal(t, "ok", get(t, p, srv.URL))
	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, 1, s.ReusedRequests)

	bodies := p.OpenBodies()
	require.Len(t, bodies, 1)
	c := onlyConn(t, p)
	require.Equal(t, c.ID, bodies[0].Conn)
	require.Equal(t, http.MethodGet, bodies[0].Method)
	require.Equal(t, 1, p.Stats().OpenBodies)
	require.Equal(t, vocab.StateIdle, c.State)

	require.NoError(t, first.Body.Close())
	require.Empty(t, p.OpenBodies())
	quiesce(t, p)
	require.NoError(t, p.Check(bounded(t)))
	s = p.Stats()
	require.Equal(t, 0, s.OpenBodies)
	require.EqualValues(t, 0, s.Closed)
}

func TestUnclosedBodyPinsConnection(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t, pool.CaptureStacks())

	resp := open(t, p, bounded(t), srv.URL) // never read
	defer resp.Body.Close()

	err := p.Check(bounded(t))
	require.Error(t, err)
	msg := err.Error()
	c := onlyConn(t, p)
	require.Equal(t, vocab.StateActive, c.State)
	require.Len(t, c.Active, 1)
	require.Contains(t, msg, "open body: GET "+srv.URL)
	require.Contains(t, msg, "TestUnclosedBodyPinsConnection", "the stack names the test")
	require.Contains(t, msg, "reuse_test.go:")
	require.Contains(t, msg, "active connection #")
	require.Contains(t, msg, "body open")

	// The next request on the one-connection pool waits for it.
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			done <- result{err: err}
			return
		}
		resp, err := p.Client().Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{body: string(b), err: err}
	}()
	waitStats(t, p, "second request waiting", func(s pool.Stats) bool { return s.Waiting == 1 })
	select {
	case r := <-done:
		t.Fatalf("the second request did not wait: %+v", r)
	default:
	}
	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.Equal(t, 1, s.Active)
	// Process-wide, so other tests' goroutines still exiting may be named
	// too: no counts.
	named := strings.Join(leaks.Goroutines(), "; ")
	require.Contains(t, named, "a request waiting for a connection (the pool is at its cap) (net/http.(*Transport).getConn)")
	require.Contains(t, named, "connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")

	// Closing the body frees the pool: the connection is closed (closed
	// before EOF) and the waiting request dials its own.
	require.NoError(t, resp.Body.Close())
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "ok", r.body)
	quiesce(t, p)
	s = p.Stats()
	require.EqualValues(t, 2, s.Dials)
	require.EqualValues(t, 2, s.WaitCount, "neither request found an idle connection")
	require.EqualValues(t, 1, s.ClosedBy[vocab.ReasonEarlyBodyClose])
	require.NoError(t, p.Check(bounded(t)))
}

// TestEarlyBodyCloseThenNextRequest: a body closed early dooms its
// connection, whose close the Transport makes after Close returned; the
// request's record, which the pool keeps for that close, is not the
// record of the next request, which the same recycled recorder traces
// before the close is seen.
func TestEarlyBodyCloseThenNextRequest(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "ok")
	}))
	p := newPool(t)
	for range 20 {
		resp := open(t, p, bounded(t), srv.URL+"/big")
		buf := make([]byte, 10)
		_, err := io.ReadFull(resp.Body, buf)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, "ok", get(t, p, srv.URL+"/ok"))
		quiesce(t, p)
	}
	s := p.Stats()
	require.EqualValues(t, 20, s.ClosedBy[vocab.ReasonEarlyBodyClose], "closes: %v", s.ClosedBy)
	require.EqualValues(t, 20, s.ClosedByClient)
}
