package pool_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/pool"
)

// sumBuckets returns the total of h's buckets.
func sumBuckets(h pool.Histogram) int64 {
	var n int64
	for _, b := range h.Buckets {
		n += b
	}
	return n
}

// TestWaitAndSetupHistograms: requests queued behind one connection per
// host wait, each wait counted once in Waits, whose sum is WaitDuration;
// each connection established is counted once in Setups; per host and in
// total alike, and OnConnOpen sees each connection once, established.
func TestWaitAndSetupHistograms(t *testing.T) {
	entered := make(chan struct{}, 8)
	release := make(chan struct{})
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	other := newServer(t, plainHTTP, okHandler)
	opened := make(chan pool.Conn, 8)
	p := newPool(t, pool.OnConnOpen(func(c pool.Conn) { opened <- c }))

	// One request holds the only connection to srv; three more wait for
	// it, then each takes it in turn.
	ctx := bounded(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp := open(t, p, ctx, srv.URL+"/hold")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	<-entered
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, p, srv.URL)
		}()
	}
	waitStats(t, p, "three requests waiting", func(s pool.Stats) bool { return s.Waiting == 3 })
	close(release)
	wg.Wait()
	get(t, p, other.URL)
	get(t, p, other.URL) // on the idle connection: no wait
	quiesce(t, p)

	s := p.Stats()
	require.EqualValues(t, 6, s.Requests)
	require.EqualValues(t, 2, s.Dials)
	// The first request to each host waited for its dial, the three
	// others for the connection in use.
	require.EqualValues(t, 5, s.WaitCount)
	require.EqualValues(t, 5, s.Waits.Count)
	require.Equal(t, s.WaitDuration, s.Waits.Sum)
	require.Len(t, s.Waits.Buckets, len(pool.DurationBuckets())+1)
	require.EqualValues(t, 5, sumBuckets(s.Waits))
	require.EqualValues(t, 2, s.Setups.Count)
	require.EqualValues(t, 2, sumBuckets(s.Setups))
	require.Positive(t, s.Setups.Sum)

	hs := p.HostStats()
	require.Len(t, hs, 2)
	held := hs[strings.TrimPrefix(srv.URL, "http://")]
	require.EqualValues(t, 4, held.Waits.Count)
	require.EqualValues(t, 1, held.Setups.Count)
	require.Equal(t, "http", held.Scheme)
	o := hs[strings.TrimPrefix(other.URL, "http://")]
	require.EqualValues(t, 1, o.Waits.Count)
	require.EqualValues(t, 1, o.Setups.Count)
	require.Equal(t, s.Waits.Sum, held.Waits.Sum+o.Waits.Sum)
	require.Empty(t, s.Scheme, "the totals have no scheme")
	for h, hs := range hs {
		require.NoError(t, hs.Check(), h)
	}

	for range 2 {
		select {
		case c := <-opened:
			require.Equal(t, "idle", string(c.State))
			require.Equal(t, "http", c.Scheme)
			require.Equal(t, "HTTP/1.1", c.Proto)
			require.Len(t, c.History, 2, "dialing, then idle")
		case <-ctx.Done():
			t.Fatal("OnConnOpen: a connection not reported")
		}
	}
	select {
	case c := <-opened:
		t.Fatalf("a third connection reported: %+v", c)
	default:
	}
}

// TestDurationBuckets: the bounds rise from tens of microseconds to 10s,
// and a copy is returned.
func TestDurationBuckets(t *testing.T) {
	b := pool.DurationBuckets()
	require.Equal(t, 25*time.Microsecond, b[0])
	require.Equal(t, 10*time.Second, b[len(b)-1])
	for i := 1; i < len(b); i++ {
		require.Greater(t, b[i], b[i-1])
	}
	b[0] = 0
	require.Equal(t, 25*time.Microsecond, pool.DurationBuckets()[0])
}

// TestInFlightByMethod: requests with bodies open are counted by method,
// a method of the caller's own as _OTHER, and none once closed.
func TestInFlightByMethod(t *testing.T) {
	srv := newServer(t, tlsHTTP1, okHandler)
	p := newPool(t, pool.MaxConnsPerHost(0), pool.MaxIdleConnsPerHost(3), pool.TLSClientConfig(srv.trust()))
	ctx := bounded(t)
	var bodies []io.Closer
	for _, m := range []string{http.MethodGet, http.MethodPost, "FROB", http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, m, srv.URL, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req)
		require.NoError(t, err)
		bodies = append(bodies, resp.Body)
	}
	s := p.Stats()
	require.Equal(t, 4, s.InFlight)
	require.Equal(t, map[string]int{"GET": 2, "POST": 1, "_OTHER": 1}, s.InFlightByMethod)
	require.NoError(t, s.Check())
	for _, h := range p.HostStats() {
		require.Equal(t, s.InFlightByMethod, h.InFlightByMethod)
		require.Equal(t, "https", h.Scheme)
	}
	for _, c := range p.Conns() {
		require.Equal(t, "https", c.Scheme)
	}
	for _, b := range bodies {
		io.Copy(io.Discard, b.(io.Reader))
		require.NoError(t, b.Close())
	}
	quiesce(t, p)
	require.Equal(t, map[string]int{"GET": 0, "POST": 0, "_OTHER": 0}, p.Stats().InFlightByMethod,
		"every method sent, at 0")
}

// TestNeverUsedConnectionsHaveAProtocol: a connection dialed for a request
// that took another one first opens idle and closes unused, and says the
// protocol it was opened for all the same, over TCP and over TLS.
func TestNeverUsedConnectionsHaveAProtocol(t *testing.T) {
	for _, mode := range []serverMode{plainHTTP, tlsHTTP1, tlsHTTP2} {
		t.Run([]string{"http", "https", "h2"}[mode], func(t *testing.T) {
			srv := newServer(t, mode, okHandler)
			// The second dial waits until the test lets it go on.
			held := testserver.HoldDial(2)
			base := &http.Transport{DialContext: held.DialContext, ForceAttemptHTTP2: mode == tlsHTTP2}
			if mode != plainHTTP {
				base.TLSClientConfig = srv.trust()
			}
			if mode == tlsHTTP2 {
				// Over HTTP/2 a second request joins the first
				// connection: no second dial.
				p, err := pool.Track(base, pool.Protocols(protocols(true)))
				require.NoError(t, err)
				t.Cleanup(p.Close)
				get(t, p, srv.URL)
				quiesce(t, p)
				require.Equal(t, "h2", onlyConn(t, p).Proto)
				return
			}
			p, err := pool.Track(base, pool.MaxIdleConnsPerHost(1))
			require.NoError(t, err)
			t.Cleanup(p.Close)
			neverUsedDial(t, p, held, srv.URL)
			quiesce(t, p)
			var unused int
			for _, c := range p.Conns() {
				want := "http"
				if mode != plainHTTP {
					want = "https"
				}
				require.Equal(t, want, c.Scheme, "#%d", c.ID)
				require.Equal(t, "HTTP/1.1", c.Proto, "#%d %+v", c.ID, c)
				if c.Requests == 0 {
					unused++
					// No room for it in the idle pool: the Transport
					// closed it, with no hook, and the server sent
					// nothing on it.
					require.Equal(t, "closed", string(c.State))
					require.Equal(t, pool.CloseReason("idle-pool-full"), c.CloseReason, "%+v", c)
				}
			}
			require.Equal(t, 1, unused, "%+v", p.Conns())
		})
	}
}

// TestHiddenRetriesCounted: a request the server read and then dropped the
// connection of, sent again by the Transport, may have been processed; a
// stream the server refused was not.
func TestHiddenRetriesCounted(t *testing.T) {
	for _, keep := range []int{256, 0} {
		t.Run(fmt.Sprintf("http1-read-then-closed/keep-closed=%d", keep), func(t *testing.T) {
			hiddenRetryRead(t, keep)
		})
	}
	t.Run("h2-refused", func(t *testing.T) {

		s, err := faultserver.New(faultserver.RawHTTP2())
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		s.Handle("/refused", faultserver.Sequence{Faults: []faultserver.Fault{
			faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{},
		}})
		p := newPool(t, pool.TLSClientConfig(s.ClientTLSConfig()))
		get(t, p, s.URL()+"/refused")
		quiesce(t, p)
		st := p.Stats()
		require.EqualValues(t, 1, st.HiddenRetries)
		require.EqualValues(t, 0, st.HiddenRetriesPossiblyProcessed)
	})
}

// hiddenRetryRead sends a request on a kept-alive connection that the
// server closes after reading it; the Transport sends it again on another.
// With KeepClosed(0) the pool forgets the closed connection, and the
// timeline's evidence alone says the request was written.
func hiddenRetryRead(t *testing.T, keepClosed int) {
	srv, err := faultserver.New()
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	srv.Handle("/retry", faultserver.CloseBeforeResponse{After: 1})
	p := newPool(t, pool.KeepClosed(keepClosed))
	get(t, p, srv.URL()+"/retry") // answered; the connection kept alive
	get(t, p, srv.URL()+"/retry") // read, then the connection closed: sent again
	quiesce(t, p)
	s := p.Stats()
	require.EqualValues(t, 2, s.Requests)
	require.EqualValues(t, 1, s.HiddenRetries)
	require.EqualValues(t, 1, s.HiddenRetriesPossiblyProcessed)
	for _, h := range p.HostStats() {
		require.EqualValues(t, 1, h.HiddenRetriesPossiblyProcessed)
	}
}

// TestSchemeOfAConnectionDialedForACancelledRequest: a dial that outlives
// its request opens a connection with the scheme of that request, before
// any request takes it.
func TestSchemeOfAConnectionDialedForACancelledRequest(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	// The Transport's own dial context does not end with the request's:
	// the held dial waits for proceed.
	held := testserver.HoldDial(1)
	dialing, proceed := held.Dialed, held.Proceed
	base := &http.Transport{DialContext: held.DialContext}
	// One connection per host: the request after the cancelled one waits
	// for that connection rather than racing the Transport's putting it
	// idle with a dial of its own.
	p, err := pool.Track(base, pool.MaxConnsPerHost(1))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithCancel(bounded(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	errc := goDo(p, req)
	testserver.Await(t, dialing, "the held dial")
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	waitStats(t, p, "the cancelled request forgotten", func(s pool.Stats) bool { return s.InFlight == 0 })
	close(proceed)
	waitStats(t, p, "the connection open", func(s pool.Stats) bool { return s.Open == 1 })
	require.Equal(t, "http", onlyConn(t, p).Scheme)
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	c := onlyConn(t, p)
	require.Equal(t, 1, c.Requests)
	require.Equal(t, "http", c.Scheme)
}

func TestOnConnOpenNil(t *testing.T) {
	_, err := pool.New(pool.OnConnOpen(nil))
	require.ErrorContains(t, err, "nil OnConnOpen")
}

// TestNeverUsedConnectionTheServerSpokeOn: a connection no request used,
// on which the server sent bytes unasked, is given up for them (a
// protocol error), not for a full idle pool.
func TestNeverUsedConnectionTheServerSpokeOn(t *testing.T) {
	var accepted atomic.Int32
	srv := newServer(t, plainHTTP, okHandler, func(s *httptest.Server) {
		s.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew && accepted.Add(1) == 2 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			}
		}
	})
	held := testserver.HoldDial(2)
	base := &http.Transport{DialContext: held.DialContext}
	p, err := pool.Track(base, pool.MaxIdleConnsPerHost(2))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	neverUsedDial(t, p, held, srv.URL)
	for _, c := range p.Conns() {
		if c.Requests == 0 {
			require.Equal(t, pool.CloseReason("protocol-error"), c.CloseReason, "%+v", c)
			require.Positive(t, c.BytesRead)
		}
	}
}
