package probe_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"

	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// guard bounds every probe of a test: generous, because it is only hit
// when something hangs.
const guard = 20 * time.Second

// server is a loopback server whose behaviour the test knows, with its
// own counts of accepted connections and requests.
type server struct {
	URL      string
	accepted testserver.Counter
	requests atomic.Int64
	tls      *tls.Config // trusts the server's certificate, nil without TLS
}

// requireAccepted asserts that the server accepts exactly want connections.
func requireAccepted[N int | int64](t *testing.T, s *server, want N, msgAndArgs ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	s.accepted.WaitAtLeast(ctx, int64(want)) // or time out: the count then says what went wrong
	require.Equal(t, int64(want), s.accepted.Load(), msgAndArgs...)
}

// requireAcceptedDials asserts that the server accepts the connections
// the probe's main run and its discovery (disc dials) connected. A dial
// the Transport abandoned may or may not have reached the server before
// it was cancelled.
func requireAcceptedDials(t *testing.T, s *server, rep *probe.Result, disc int64) {
	t.Helper()
	lo := rep.Dials - rep.DialErrors - rep.DialsAbandoned + disc
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	s.accepted.WaitAtLeast(ctx, lo) // or time out: the count then says what went wrong
	n := s.accepted.Load()
	require.True(t, lo <= n && n <= lo+rep.DialsAbandoned,
		"server accepts %d, probe dials %d (%d failed, %d abandoned), discovery dials %d: %+v",
		n, rep.Dials, rep.DialErrors, rep.DialsAbandoned, disc, rep.Connections)
}

// goServer starts an httptest server that answers "ok" and, with
// closeEvery > 0, sets "Connection: close" on every closeEvery-th response
// of each connection. configure runs before the server starts.
func goServer(t *testing.T, closeEvery int, configure ...func(*httptest.Server)) *server {
	t.Helper()
	s := &server{}
	hs := httptest.NewUnstartedServer(nil)
	testserver.ServeOK(hs, closeEvery, &s.requests, &s.accepted)
	useTLS := false
	for _, f := range configure {
		f(hs)
		if hs.TLS != nil || hs.EnableHTTP2 {
			useTLS = true
		}
	}
	if useTLS {
		hs.StartTLS()
		roots := x509.NewCertPool()
		roots.AddCert(hs.Certificate())
		s.tls = &tls.Config{RootCAs: roots}
	} else {
		hs.Start()
	}
	s.URL = hs.URL
	t.Cleanup(hs.Close)
	return s
}

// startCounting starts hs (plain HTTP) counting the connections it
// accepts.
func startCounting(t *testing.T, hs *httptest.Server) *server {
	t.Helper()
	s := &server{}
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// withTLS makes goServer serve TLS without HTTP/2 (ALPN http/1.1 only).
func withTLS(hs *httptest.Server) { hs.TLS = &tls.Config{} }

// withH2 makes goServer serve TLS with HTTP/2.
func withH2(hs *httptest.Server) { hs.EnableHTTP2 = true }

// withIdleTimeout sets the server's keep-alive idle timeout.
func withIdleTimeout(d time.Duration) func(*httptest.Server) {
	return func(hs *httptest.Server) { hs.Config.IdleTimeout = d }
}

// rawServer starts a TCP server that calls handle on each accepted
// connection (and closes it after). It counts the accepted connections.
func rawServer(t *testing.T, handle func(s *server, c net.Conn)) *server {
	t.Helper()
	s := &server{}
	ln := testserver.Raw(t, func(c net.Conn) {
		s.accepted.Add(1)
		handle(s, c)
	})
	s.URL = "http://" + ln.Addr().String()
	return s
}

// http10 answers each request with an HTTP/1.0 response without
// keep-alive, then closes the connection.
func http10(s *server, c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	req.Body.Close()
	s.requests.Add(1)
	io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
}

// closeAfterReadingSecond answers the first request of a connection with
// keep-alive, then reads the second and closes without a word: the
// Transport retries that request on a new connection by itself.
func closeAfterReadingSecond(s *server, c net.Conn) {
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req.Body.Close()
		s.requests.Add(1)
		if i == 0 {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}
}

// answerThenDropNext answers n requests of a connection with keep-alive,
// then reads the next and closes without a word: the Transport sends that
// one again on a new connection by itself.
func answerThenDropNext(n int) func(*server, net.Conn) {
	return func(s *server, c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; i <= n; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			req.Body.Close()
			s.requests.Add(1)
			if i < n {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}
	}
}

// errorServer starts a server that answers every request with status and
// "Connection: close", as a server does that refuses a request before its
// handler runs (431 for headers too large, say). It counts the requests
// in requests.
func errorServer(t *testing.T, status int, requests *atomic.Int64) *server {
	t.Helper()
	return startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
	})))
}

// garbage answers a request with bytes that are not HTTP.
func garbage(_ *server, c net.Conn) {
	if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
		return
	}
	io.WriteString(c, "this is not HTTP at all\r\n\r\n")
}

// banner speaks first, as an SSH server does, before any request.
func banner(_ *server, c net.Conn) {
	io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
	io.Copy(io.Discard, io.LimitReader(c, 1<<16))
}

// fullBacklog returns a listener address whose accept queue is full, so
// that a dial to it hangs until its timeout: a listener with backlog 0 that
// never accepts, holding one queued connection. Linux.
func fullBacklog(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	setBacklog0(t, ln)
	held, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { held.Close() })
	return ln.Addr().String()
}

func setBacklog0(t *testing.T, ln net.Listener) {
	t.Helper()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var lerr error
	require.NoError(t, rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }))
	require.NoError(t, lerr)
}

// oneShotListener accepts one connection, then none: the connections
// after it wait in the accept queue.
type oneShotListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
	taken  atomic.Bool
}

func (l *oneShotListener) Accept() (net.Conn, error) {
	if l.taken.CompareAndSwap(false, true) {
		return l.Listener.Accept()
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneShotListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// runProbe runs a probe of s with opts, bounded by guard.
func runProbe(t *testing.T, s *server, opts ...probe.Option) (*probe.Result, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/", nil)
	require.NoError(t, err)
	all := []probe.Option{probe.Deadline(guard)}
	if s.tls != nil {
		all = append(all, probe.TLSClientConfig(s.tls))
	}
	return probe.Run(t.Context(), req, append(all, opts...)...)
}

// mustProbe is runProbe for a probe that must not fail.
func mustProbe(t *testing.T, s *server, opts ...probe.Option) *probe.Result {
	t.Helper()
	rep, err := runProbe(t, s, opts...)
	require.NoError(t, err)
	require.NotNil(t, rep)
	return rep
}

// requireFindings checks that rep has exactly the findings named.
// dropRacedResumption removes tls-not-resumed from the findings of a run
// whose concurrent dials all began together: whether one handshake began
// after another had finished (and so could have resumed its session) is
// the scheduler's doing on a loaded machine, not the server's.
func dropRacedResumption(t *testing.T, rep *probe.Result) {
	t.Helper()
	if f, ok := rep.Has("tls-not-resumed"); ok {
		require.Equal(t, 0, rep.TLS.Resumed, f.Message)
		rep.Findings = slices.DeleteFunc(rep.Findings, func(f probe.Finding) bool { return f.ID == "tls-not-resumed" })
	}
}

func requireFindings(t *testing.T, rep *probe.Result, ids ...string) {
	t.Helper()
	got := make([]string, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		got = append(got, f.ID)
	}
	require.ElementsMatch(t, ids, got, "findings: %+v", rep.Findings)
}

// switchingProtocols answers a request with a 101 and a first byte of the
// protocol switched to, then says nothing more until the client closes the
// connection; it counts those closes in closed.
func switchingProtocols(closed *testserver.Counter) func(*server, net.Conn) {
	return func(s *server, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		s.requests.Add(1)
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\nabc")
		io.Copy(io.Discard, c)
		closed.Add(1)
	}
}
