package pool_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// gatedDialer dials as a net.Dialer does, except that its dial number gate
// (1, 2, …) signals entered and waits for release (or its context) first.
type gatedDialer struct {
	gate             int64
	n                atomic.Int64
	entered, release chan struct{}
}

func newGatedDialer(gate int64) *gatedDialer {
	return &gatedDialer{gate: gate, entered: make(chan struct{}), release: make(chan struct{})}
}

func (d *gatedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.n.Add(1) == d.gate {
		close(d.entered)
		select {
		case <-d.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// TestUnusedDialRefusedByIdlePool: a request that dialed, and then got a
// connection that went idle before its dial ended, leaves that dial unused;
// net/http then offers it to the idle pool, which is full
// (MaxIdleConnsPerHost 1), and closes it with no hook. The pool names that
// close idle-pool-full, never used: not protocol-error, which would say
// the server sent bytes, when it sent none.
func TestUnusedDialRefusedByIdlePool(t *testing.T) {
	for _, mode := range []serverMode{plainHTTP, tlsHTTP1} {
		t.Run([]string{"http", "https"}[mode], func(t *testing.T) {
			srv := newServer(t, mode, okHandler)
			d := newGatedDialer(2)
			opts := []pool.Option{pool.MaxConnsPerHost(0), pool.MaxIdleConnsPerHost(1)}
			if mode == tlsHTTP1 {
				opts = append(opts, pool.TLSClientConfig(srv.trust()))
			}
			p, err := pool.Track(&http.Transport{DialContext: d.DialContext}, opts...)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			ctx := bounded(t)

			first := open(t, p, ctx, srv.URL) // its connection stays active
			second := goGet(p, ctx, srv.URL)
			testserver.Await(t, d.entered, "the second request's dial")
			// The first connection goes idle: the second request, which
			// waits for a connection, takes it and returns it idle.
			_, err = io.Copy(io.Discard, first.Body)
			require.NoError(t, err)
			require.NoError(t, first.Body.Close())
			require.Equal(t, "ok", <-second)
			waitStats(t, p, "the first connection idle, served twice", func(s pool.Stats) bool { return s.Idle == 1 && s.Requests == 2 && s.InFlight == 0 })
			close(d.release) // the second dial ends, with nothing to serve
			waitStats(t, p, "the second connection closed", func(s pool.Stats) bool { return s.Closed == 1 })

			conns := p.Conns()
			require.Len(t, conns, 2)
			used, unused := conns[0], conns[1]
			require.Equal(t, 2, used.Requests)
			require.Equal(t, vocab.StateIdle, used.State)
			require.Zero(t, unused.Requests, "%+v", unused)
			require.Equal(t, vocab.StateClosed, unused.State, "%+v", unused)
			require.Equal(t, vocab.ClosedByClient, unused.ClosedBy, "%+v", unused)
			require.Equal(t, vocab.ReasonIdlePoolFull, unused.CloseReason, "%+v", unused)
			require.Contains(t, unused.CloseDetail, "never used")
			require.False(t, unused.Abandoned)
			if mode == plainHTTP {
				require.Zero(t, unused.BytesRead, "the server sent nothing on it")
			}
			s := p.Stats()
			require.EqualValues(t, 2, s.Dials)
			require.EqualValues(t, 1, s.ClosedBy[vocab.ReasonIdlePoolFull], "%v", s.ClosedBy)
			require.Zero(t, s.ClosedBy[vocab.ReasonProtocolError], "%v", s.ClosedBy)
			require.NoError(t, s.Check())
		})
	}
}

// orderedListener hands the connections it accepted to the server in the
// order the test releases them (1 for the first to arrive, 2 for the
// second, …): a client's TLS handshake on a connection not yet handed over
// waits, its ClientHello unread.
type orderedListener struct {
	net.Listener
	release chan int
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	n       int
	arrived map[int]net.Conn
}

func newOrderedListener(ln net.Listener) *orderedListener {
	return &orderedListener{Listener: ln, release: make(chan int, 16), done: make(chan struct{}), arrived: map[int]net.Conn{}}
}

func (l *orderedListener) Accept() (net.Conn, error) {
	var want int
	select {
	case want = <-l.release:
	case <-l.done:
		return nil, net.ErrClosed
	}
	for {
		l.mu.Lock()
		if c, ok := l.arrived[want]; ok {
			delete(l.arrived, want)
			l.mu.Unlock()
			return c, nil
		}
		l.mu.Unlock()
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.n++
		l.arrived[l.n] = c
		l.mu.Unlock()
	}
}

func (l *orderedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	l.mu.Lock()
	for _, c := range l.arrived {
		c.Close()
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// TestTwoHandshakesOfOneRequest: a request dials, takes another connection
// that went idle meanwhile, loses it (the server closes it on reading the
// request) and is sent again by the Transport on a second dial of its own:
// two TLS handshakes run for one request at once, each reporting to that
// request's trace. The second ends first and serves the request; the first
// ends after, unused, and the idle pool (one per host) refuses it. Each
// connection's handshake is the one it saw: the unused one succeeded, and
// is closed as idle-pool-full, not handshake-failed.
func TestTwoHandshakesOfOneRequest(t *testing.T) {
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/again" && calls.Add(1) == 1 {
			// On the kept-alive connection: closed, the request read and
			// unanswered, which the Transport sends again.
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		io.WriteString(w, "ok")
	})
	var ln *orderedListener
	srv := newServer(t, tlsHTTP1, h, func(s *httptest.Server) {
		ln = newOrderedListener(s.Listener)
		s.Listener = ln
	})
	p := newPool(t, pool.MaxConnsPerHost(0), pool.MaxIdleConnsPerHost(1), pool.TLSClientConfig(srv.trust()), pool.Protocols(protocols(false)))
	ctx := bounded(t)

	ln.release <- 1
	first := open(t, p, ctx, srv.URL+"/first") // connection 1, its body open
	again := goGet(p, ctx, srv.URL+"/again")
	inHandshake := func(id uint64) func(pool.Stats) bool {
		return func(pool.Stats) bool {
			c, ok := p.Conn(id)
			return ok && c.State == vocab.StateHandshake
		}
	}
	// Connected, so that the server accepts it before the next one.
	waitStats(t, p, "the second request's dial (connection 2) in its handshake", inHandshake(2))
	// Connection 1 goes idle: the second request takes it, is cut, and is
	// sent again on a dial of its own (connection 3).
	_, err := io.Copy(io.Discard, first.Body)
	require.NoError(t, err)
	require.NoError(t, first.Body.Close())
	waitStats(t, p, "connection 3 in its handshake, beside connection 2", inHandshake(3))
	ln.release <- 3
	require.Equal(t, "ok", <-again)
	waitStats(t, p, "connection 3 idle", func(s pool.Stats) bool { return s.Idle == 1 && s.InFlight == 0 })
	ln.release <- 2
	waitStats(t, p, "connections 1 and 2 closed", func(s pool.Stats) bool { return s.Closed == 2 && s.Dialing == 0 })

	conns := p.Conns()
	require.Len(t, conns, 3)
	require.Equal(t, vocab.ReasonServerEOF, conns[0].CloseReason, "%+v", conns[0])
	unused := conns[1]
	require.Equal(t, vocab.StateClosed, unused.State, "%+v", unused)
	require.Zero(t, unused.Requests)
	require.Equal(t, vocab.ClosedByClient, unused.ClosedBy, "%+v", unused)
	require.Equal(t, vocab.ReasonIdlePoolFull, unused.CloseReason, "%+v", unused)
	require.False(t, unused.Abandoned)
	served := conns[2]
	require.Equal(t, vocab.StateIdle, served.State, "%+v", served)
	require.Equal(t, 1, served.Requests)
	require.Equal(t, conns[1].DialedFor, served.DialedFor, "both dialed for the second request")
	s := p.Stats()
	require.Zero(t, s.ClosedBy[vocab.ReasonHandshakeFailed], "%v", s.ClosedBy)
	require.EqualValues(t, 2, s.Requests)
	require.NoError(t, s.Check())
}
