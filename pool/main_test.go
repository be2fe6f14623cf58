package pool_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// bounded returns a context that ends after testkit.WaitBound or with the test.
func bounded(t *testing.T) context.Context { return testkit.Bounded(t) }

// newPool returns a pool whose idle connections are closed at the end of
// the test, capped at one connection per host and one idle (the audit's
// reference pool) unless opts say otherwise.
func newPool(t *testing.T, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New(append([]pool.Option{pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// server is an httptest server that counts the connections it accepted.
type server struct {
	*httptest.Server
	accepted testserver.Counter
}

type serverMode int

const (
	plainHTTP serverMode = iota
	tlsHTTP1
	tlsHTTP2
)

// newServer starts h on loopback, closed at the end of the test (after the
// pools made afterwards, whose cleanups run first).
// Each edit runs on the unstarted server.
func newServer(t *testing.T, mode serverMode, h http.Handler, edit ...func(*httptest.Server)) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected in some tests
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	for _, e := range edit {
		e(s.Server)
	}
	switch mode {
	case plainHTTP:
		s.Start()
	case tlsHTTP1:
		s.StartTLS()
	case tlsHTTP2:
		s.EnableHTTP2 = true
		s.StartTLS()
	}
	t.Cleanup(s.Close)
	return s
}

// trust returns a TLS config that trusts s's certificate.
func (s *server) trust() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	return &tls.Config{RootCAs: roots}
}

// okHandler answers "ok" with a Content-Length.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// get sends a GET through p's client, reads the body to EOF and closes it.
func get(t *testing.T, p *pool.Pool, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// goGet sends a GET through p's client on a goroutine of its own, with
// ctx, and sends the body it read (or the error's text) on the channel it
// returns.
func goGet(p *pool.Pool, ctx context.Context, url string) <-chan string {
	body := make(chan string, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			body <- err.Error()
			return
		}
		resp, err := p.Client().Do(req)
		if err != nil {
			body <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body <- string(b)
	}()
	return body
}

// goDo sends req through p's client on a goroutine of its own, closes the
// body of its response, if any, and sends its error on the channel it
// returns.
func goDo(p *pool.Pool, req *http.Request) <-chan error {
	errc := make(chan error, 1)
	go func() {
		resp, err := p.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// neverUsedDial makes p, over a transport that dials with held (holding
// its second dial), open a connection no request uses: a first request's
// body stays open while a second one dials; the first connection then goes
// idle and the second request takes it; the held dial goes on, and its
// connection opens for nothing and is closed.
func neverUsedDial(t *testing.T, p *pool.Pool, held *testserver.HeldDial, url string) {
	t.Helper()
	first := open(t, p, bounded(t), url)
	done := goGet(p, bounded(t), url)
	testserver.Await(t, held.Dialed, "the second request's dial")
	io.Copy(io.Discard, first.Body)
	require.NoError(t, first.Body.Close())
	require.Equal(t, "ok", <-done)
	waitStats(t, p, "the first connection idle again", func(s pool.Stats) bool { return s.Idle == 1 && s.InFlight == 0 })
	close(held.Proceed)
	waitStats(t, p, "the second connection opened and closed", func(s pool.Stats) bool {
		return s.Dials == 2 && s.Dialing == 0 && s.Closed == 1
	})
}

// open sends a GET through p's client and returns the response with its
// body unread and open.
func open(t *testing.T, p *pool.Pool, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	return resp
}

// quiesce waits for p to settle and checks the invariants.
func quiesce(t *testing.T, p *pool.Pool) {
	t.Helper()
	require.NoError(t, p.Quiesce(bounded(t)))
	require.NoError(t, p.Stats().Check())
}

// waitStats waits until cond holds for p's totals.
func waitStats(t *testing.T, p *pool.Pool, what string, cond func(pool.Stats) bool) {
	t.Helper()
	require.NoError(t, p.WaitFor(bounded(t), cond), what)
}

// onlyConn returns the one connection p knows.
func onlyConn(t *testing.T, p *pool.Pool) pool.Conn {
	t.Helper()
	cs := p.Conns()
	require.Len(t, cs, 1, "connections: %+v", cs)
	return cs[0]
}

// protocols returns HTTP/1, with HTTP/2 if h2.
func protocols(h2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(h2)
	return p
}
