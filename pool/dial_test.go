package pool_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// heldDialer is a DialContext whose dials wait until released.
type heldDialer struct {
	started chan struct{} // one value per dial that started
	release chan struct{} // closed to let the dials proceed
}

func newHeldDialer() *heldDialer {
	return &heldDialer{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (d *heldDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.started <- struct{}{}
	select {
	case <-d.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// timelineOf returns the one finished timeline whose URL path is path.
func timelineOf(t *testing.T, col *httptrace.Collector, path string) *httptrace.Timeline {
	t.Helper()
	var found *httptrace.Timeline
	for _, tl := range col.Timelines() {
		u := tl.RawURL()
		if u.Path == path {
			require.Nil(t, found, "two timelines for %s", path)
			found = tl
		}
	}
	require.NotNil(t, found, "no timeline for %s", path)
	return found
}

// holdListener holds the first Read of each accepted connection until
// released, which stalls the TLS handshake of the client.
type holdListener struct {
	net.Listener
	accepted chan struct{}
	release  chan struct{}
}

func (l *holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted <- struct{}{}
	return &holdConn{Conn: c, release: l.release}, nil
}

type holdConn struct {
	net.Conn
	release chan struct{}
}

func (c *holdConn) Read(b []byte) (int, error) {
	<-c.release
	return c.Conn.Read(b)
}

// TestOrphanedDial: a dial started for request A, which is cancelled while
// the dial hangs, goes on in the background; its connection opens for A's
// timeline and then serves request B, to which it is attributed.
func TestOrphanedDial(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handshake bool // hold the TLS handshake rather than the TCP dial
		bWaits    bool // B is waiting for a connection when the dial ends
	}{
		{name: "dial/B after the dial"},
		{name: "dial/B waiting", bWaits: true},
		{name: "handshake/B after the dial", handshake: true},
		{name: "handshake/B waiting", handshake: true, bWaits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := &httptrace.Collector{}
			var (
				srv     *server
				p       *pool.Pool
				started chan struct{}
				release chan struct{}
			)
			if tc.handshake {
				hold := &holdListener{accepted: make(chan struct{}, 16), release: make(chan struct{})}
				started, release = hold.accepted, hold.release
				srv = newServer(t, tlsHTTP1, okHandler, func(s *httptest.Server) {
					hold.Listener = s.Listener
					s.Listener = hold
				})
				p = newPool(t, pool.WithObserver(col), pool.TLSClientConfig(srv.trust()))
			} else {
				srv = newServer(t, plainHTTP, okHandler)
				d := newHeldDialer()
				started, release = d.started, d.release
				base := &http.Transport{DialContext: d.DialContext, MaxConnsPerHost: 1}
				var err error
				p, err = pool.Track(base, pool.WithObserver(col))
				require.NoError(t, err)
				t.Cleanup(p.Close)
			}
			var once sync.Once
			unhold := func() { once.Do(func() { close(release) }) }
			t.Cleanup(unhold) // before the server closes

			// Request A: cancelled while its dial hangs.
			ctxA, cancelA := context.WithCancel(bounded(t))
			reqA, err := http.NewRequestWithContext(ctxA, http.MethodGet, srv.URL+"/a", nil)
			require.NoError(t, err)
			errA := goDo(p, reqA)
			<-started
			cancelA()
			require.ErrorIs(t, <-errA, context.Canceled)
			tlA := timelineOf(t, col, "/a")
			require.Equal(t, vocab.ClassCanceled, tlA.Outcome.Class)
			s := p.Stats()
			require.Equal(t, 1, s.Dialing, "the dial goes on after A was cancelled")
			require.Equal(t, 0, s.InFlight)
			require.NoError(t, s.Check())

			var bodyB <-chan string
			if tc.bWaits {
				bodyB = goGet(p, bounded(t), srv.URL+"/b")
				waitStats(t, p, "B waiting", func(s pool.Stats) bool { return s.Waiting == 1 })
			}

			unhold()
			if tc.bWaits {
				require.Equal(t, "ok", <-bodyB)
			} else {
				waitStats(t, p, "the orphaned dial opened", func(s pool.Stats) bool { return s.Open == 1 && s.Dialing == 0 })
				c := onlyConn(t, p)
				require.Equal(t, vocab.StateIdle, c.State)
				require.Equal(t, tlA.ID, c.DialedFor)
				require.Zero(t, c.Requests)
				require.Equal(t, "ok", get(t, p, srv.URL+"/b"))
			}
			quiesce(t, p)

			tlB := timelineOf(t, col, "/b")
			require.Equal(t, vocab.ClassOK, tlB.Outcome.Class)
			c := onlyConn(t, p)
			require.Equal(t, tlA.ID, c.DialedFor, "dialed for A")
			require.Equal(t, []uint64{tlB.ID}, c.RequestIDs, "served B only")
			require.Equal(t, 1, c.Requests)
			require.Equal(t, c.ID, tlB.Conn.ID)
			require.Zero(t, tlA.Conn.ID, "A never got a connection")
			if tc.handshake {
				require.NotEmpty(t, c.TLSVersion, "%+v", c)
				require.Equal(t, "HTTP/1.1", c.Proto)
			}

			s = p.Stats()
			require.EqualValues(t, 1, s.Dials)
			require.EqualValues(t, 0, s.DialErrors)
			require.EqualValues(t, 2, s.Requests)
			require.EqualValues(t, 0, s.ReusedRequests)
			require.EqualValues(t, 1, srv.accepted.Load())

			// The dial's own events reached A's timeline late, not B's.
			late := map[httptrace.Kind]int{}
			for _, le := range col.Late() {
				require.NotEqual(t, tlB.ID, le.Timeline)
				if le.Timeline == tlA.ID {
					late[le.Event.Kind]++
				}
			}
			if tc.handshake {
				require.Equal(t, 1, late[vocab.KindTLSDone], "late events of A: %v", late)
			} else {
				require.Equal(t, 1, late[vocab.KindConnectDone], "late events of A: %v", late)
			}
			for _, k := range []httptrace.Kind{vocab.KindConnectStart, vocab.KindTLSStart} {
				_, ok := tlB.First(k)
				require.False(t, ok, "B made no dial (%s)", k)
			}
		})
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	col := &httptrace.Collector{}
	p := newPool(t, pool.WithObserver(col))
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, "http://"+addr, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	quiesce(t, p)

	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, 1, s.DialErrors)
	require.Zero(t, s.Open)
	require.Zero(t, s.Closed)
	require.NoError(t, s.Check())
	c := onlyConn(t, p)
	require.Equal(t, vocab.StateFailed, c.State)
	require.Contains(t, c.DialError, "refused")
	require.False(t, c.Abandoned)
	require.Equal(t, addr, c.Host)
	require.Len(t, col.Timelines(), 1)
	require.Equal(t, vocab.ClassConnectRefused, col.Timelines()[0].Outcome.Class)
	require.NoError(t, p.Check(bounded(t)))
}

func TestTLSHandshakeFailed(t *testing.T) {
	srv := newServer(t, tlsHTTP1, okHandler)
	col := &httptrace.Collector{}
	p := newPool(t, pool.WithObserver(col)) // does not trust the test certificate
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	require.Len(t, col.Timelines(), 1)
	require.Equal(t, vocab.ClassTLS, col.Timelines()[0].Outcome.Class)
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })

	c := requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonHandshakeFailed)
	require.Empty(t, c.TLSVersion)
	require.False(t, c.Abandoned)
	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, 0, s.DialErrors, "the TCP dial succeeded")
	require.Zero(t, s.Dialing)
	require.Zero(t, s.Open)
}

// silentTLS listens on loopback, accepts one connection, signals hello once
// the client's first bytes (its TLS ClientHello) arrived, and then reads
// until the client closes: a handshake that never ends.
func silentTLS(t *testing.T) (addr string, hello <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return
		}
		close(h)
		io.Copy(io.Discard, c) //nolint:errcheck // until the client closes
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), h
}

// cancelOnSignal sends a GET to url through p's client, cancels it once
// signal (what) comes, and checks that it ended cancelled.
func cancelOnSignal(t *testing.T, p *pool.Pool, url string, signal <-chan struct{}, what string) {
	t.Helper()
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		resp, err := p.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	testserver.Await(t, signal, what)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
}

// TestTLSHandshakeAbandoned: a handshake the Transport cancels once no
// request needs its connection (the request gave up; CloseIdleConnections
// then cancels the dial) is abandoned, not failed.
func TestTLSHandshakeAbandoned(t *testing.T) {
	addr, hello := silentTLS(t)
	p := newPool(t)
	cancelOnSignal(t, p, "https://"+addr+"/", hello, "the client's ClientHello")
	// The dial goes on for a later request until the Transport abandons it.
	require.Equal(t, vocab.StateHandshake, onlyConn(t, p).State)
	p.CloseIdleConnections()
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })

	c := requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonHandshakeAbandon)
	require.True(t, c.Abandoned)
	require.Empty(t, c.DialError)
	s := p.Stats()
	require.EqualValues(t, 1, s.Dials)
	require.Zero(t, s.DialErrors)
	require.Zero(t, s.Dialing)
}

// TestDialAbandoned: a dial the Transport cancels once no request needs it
// fails, and is marked abandoned (TestDialRefused: one that fails by
// itself is not).
func TestDialAbandoned(t *testing.T) {
	started := make(chan struct{})
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		close(started)
		<-ctx.Done() // a dial that hangs until the Transport gives it up
		return nil, ctx.Err()
	}}
	p, err := pool.Track(tr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	cancelOnSignal(t, p, "http://127.0.0.1:1/", started, "the dial")
	p.CloseIdleConnections()
	waitStats(t, p, "dial failed", func(s pool.Stats) bool { return s.DialErrors == 1 })
	c := onlyConn(t, p)
	require.Equal(t, vocab.StateFailed, c.State)
	require.True(t, c.Abandoned, "dial error %q", c.DialError)
}
