package pool_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"

	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// requireClosed checks that p knows exactly one closed connection, closed
// by and for the given side and reason.
func requireClosed(t *testing.T, p *pool.Pool, by pool.Closer, reason pool.CloseReason) pool.Conn {
	t.Helper()
	c := onlyConn(t, p)
	require.Equal(t, vocab.StateClosed, c.State)
	require.Equal(t, by, c.ClosedBy, "closed by")
	require.Equal(t, reason, c.CloseReason, "reason (detail %q)", c.CloseDetail)
	require.False(t, c.ClosedAt.IsZero())
	s := p.Stats()
	require.EqualValues(t, 1, s.Closed)
	require.EqualValues(t, 1, s.ClosedBy[reason])
	if by == vocab.ClosedByServer {
		require.EqualValues(t, 1, s.ClosedByServer)
	} else {
		require.EqualValues(t, 1, s.ClosedByClient)
	}
	require.NoError(t, s.Check())
	return c
}

func TestServerConnectionClose(t *testing.T) {
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	p := newPool(t)
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	c := requireClosed(t, p, vocab.ClosedByServer, vocab.ReasonConnectionClose)
	// Its times, in order: dialed, first used, closed.
	require.False(t, c.FirstUsedAt.IsZero(), "first used")
	require.False(t, c.FirstUsedAt.Before(c.DialedAt), "first used %v before its dial %v", c.FirstUsedAt, c.DialedAt)
	require.False(t, c.ClosedAt.Before(c.FirstUsedAt), "closed %v before its first use %v", c.ClosedAt, c.FirstUsedAt)
	// The debug page's lane says the same close.
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=html", nil))
	require.Contains(t, rec.Body.String(), `<tspan class="reason">connection-close</tspan><tspan> by server</tspan>`)

	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	require.EqualValues(t, 2, p.Stats().Dials)
	require.EqualValues(t, 0, p.Stats().ReusedRequests)
}

// http10Server answers every request on a raw TCP listener with an
// HTTP/1.0 response without keep-alive, then closes the connection.
func http10Server(t *testing.T) string {
	t.Helper()
	ln := testserver.Raw(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		req.Body.Close()
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	return "http://" + ln.Addr().String()
}

func TestServerHTTP10NoKeepAlive(t *testing.T) {
	url := http10Server(t)
	p := newPool(t)
	require.Equal(t, "ok", get(t, p, url))
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	c := requireClosed(t, p, vocab.ClosedByServer, vocab.ReasonHTTP10)
	require.Equal(t, "HTTP/1.0", c.Proto)

	require.Equal(t, "ok", get(t, p, url))
	quiesce(t, p)
	require.EqualValues(t, 2, p.Stats().Dials)
}

func TestServerClosedIdle(t *testing.T) {
	t.Run("CloseClientConnections", func(t *testing.T) {
		srv := newServer(t, plainHTTP, okHandler)
		p := newPool(t)
		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		require.Equal(t, vocab.StateIdle, onlyConn(t, p).State)

		srv.CloseClientConnections()
		waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
		requireClosed(t, p, vocab.ClosedByServer, vocab.ReasonServerClosedIdle)
	})
	t.Run("IdleTimeout", func(t *testing.T) {
		srv := newServer(t, plainHTTP, okHandler, func(s *httptest.Server) { s.Config.IdleTimeout = 20 * time.Millisecond })
		p := newPool(t)
		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
		requireClosed(t, p, vocab.ClosedByServer, vocab.ReasonServerClosedIdle)
	})
	// Over TLS the server's close begins with its close_notify, on which
	// crypto/tls reports EOF to net/http and reads no further: no read
	// error reaches the pool, which reads the alert's record instead (its
	// type in TLS 1.2, its size in TLS 1.3).
	for name, version := range map[string]uint16{"IdleTimeout/TLS 1.2": tls.VersionTLS12, "IdleTimeout/TLS 1.3": tls.VersionTLS13} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, tlsHTTP1, okHandler, func(s *httptest.Server) { s.Config.IdleTimeout = 20 * time.Millisecond })
			cfg := srv.trust()
			cfg.MinVersion, cfg.MaxVersion = version, version
			p := newPool(t, pool.TLSClientConfig(cfg))
			require.Equal(t, "ok", get(t, p, srv.URL))
			quiesce(t, p)
			waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
			c := requireClosed(t, p, vocab.ClosedByServer, vocab.ReasonServerClosedIdle)
			require.Equal(t, tls.VersionName(version), c.TLSVersion)
			require.Contains(t, c.CloseDetail, "TLS alert")
		})
	}
}

func TestClientCloseIdleConnections(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	p.CloseIdleConnections()
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonCloseIdle)

	// Through the client too: http.Client.CloseIdleConnections reaches the
	// pool.
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	p.Client().CloseIdleConnections()
	waitStats(t, p, "second connection closed", func(s pool.Stats) bool { return s.Closed == 2 })
	require.EqualValues(t, 2, p.Stats().ClosedBy[vocab.ReasonCloseIdle])
}

func TestClientIdleConnTimeout(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t, pool.IdleConnTimeout(50*time.Millisecond))
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonIdleTimeout)
}

func TestCancelAwaitingHeaders(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			io.WriteString(w, "ok")
			return
		}
		entered <- struct{}{}
		<-r.Context().Done() // the client closed the connection
	}))
	p := newPool(t)
	ctx, cancel := context.WithCancel(bounded(t))
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
		resp, err := p.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	c := requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonRequestError)
	require.Equal(t, "canceled", c.CloseDetail)

	require.Equal(t, "ok", get(t, p, srv.URL+"/ok"))
	quiesce(t, p)
	require.EqualValues(t, 2, p.Stats().Dials)
	require.NoError(t, p.Check(bounded(t)))
}

func TestClientDisableKeepAlives(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t, pool.DisableKeepAlives(true))
	for range 2 {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	quiesce(t, p)
	waitStats(t, p, "connections closed", func(s pool.Stats) bool { return s.Closed == 2 })
	s := p.Stats()
	require.EqualValues(t, 2, s.Dials)
	require.EqualValues(t, 2, s.ClosedBy[vocab.ReasonKeepAlivesOff], "closed by: %v", s.ClosedBy)
	require.EqualValues(t, 2, s.ClosedByClient)
	require.NoError(t, s.Check())
}

func TestClientIdlePoolFull(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t, pool.MaxConnsPerHost(0), pool.MaxIdleConnsPerHost(1))
	ctx := bounded(t)
	first := open(t, p, ctx, srv.URL)
	second := open(t, p, ctx, srv.URL) // the first pins its connection: a second dial
	for _, resp := range []*http.Response{first, second} {
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "ok", string(b))
		require.NoError(t, resp.Body.Close())
	}
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	s := p.Stats()
	require.EqualValues(t, 2, s.Dials)
	require.Equal(t, 1, s.Idle)
	require.EqualValues(t, 1, s.ClosedBy[vocab.ReasonIdlePoolFull], "closed by: %v", s.ClosedBy)
	require.NoError(t, s.Check())
}

// TestKeepClosed: the pool remembers the KeepClosed most recently closed
// connections, forgetting the oldest first; its counts forget none.
func TestKeepClosed(t *testing.T) {
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	p := newPool(t, pool.KeepClosed(2))
	for i := range 5 {
		require.Equal(t, "ok", get(t, p, srv.URL))
		waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == int64(i+1) })
	}
	var ids []uint64
	for _, c := range p.Conns() {
		ids = append(ids, c.ID)
	}
	require.Equal(t, []uint64{4, 5}, ids)
	_, ok := p.Conn(3)
	require.False(t, ok, "forgotten")
	c, ok := p.Conn(5)
	require.True(t, ok)
	require.Equal(t, vocab.ReasonConnectionClose, c.CloseReason)
	s := p.Stats()
	require.EqualValues(t, 5, s.Closed)
	require.EqualValues(t, 5, s.Dials)
}
