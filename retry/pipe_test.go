package retry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// pipeNet serves an http.Handler over net.Pipe connections, for tests in a
// testing/synctest bubble: no real socket, no wall-clock wait. Every dial of
// its Transport creates a pipe and hands the server end to an http.Server
// through a listener that accepts exactly the conns dialed. Build it inside
// the bubble; its cleanup closes idle connections and the server before the
// bubble ends, so a body left open fails the test as a bubble deadlock.
type pipeNet struct {
	client *http.Client
	tr     *http.Transport
	dials  atomic.Int64

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeNet(t *testing.T, h http.Handler) *pipeNet {
	t.Helper()
	pn := &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(pn)
	}()
	pn.tr = &http.Transport{MaxConnsPerHost: 1, DialContext: pn.dial}
	pn.client = &http.Client{Transport: pn.tr}
	t.Cleanup(func() {
		pn.tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return pn
}

func (pn *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case pn.conns <- s:
		pn.dials.Add(1)
		return c, nil
	case <-pn.done:
		_, _ = c.Close(), s.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		_, _ = c.Close(), s.Close()
		return nil, ctx.Err()
	}
}

// Accept, Close and Addr make pipeNet the server's net.Listener.
func (pn *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-pn.conns:
		return c, nil
	case <-pn.done:
		return nil, net.ErrClosed
	}
}

func (pn *pipeNet) Close() error {
	pn.once.Do(func() { close(pn.done) })
	return nil
}

func (pn *pipeNet) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// pipeURL is the URL of every request to a pipeNet; the dialer ignores the
// host, so no name is ever looked up.
const pipeURL = "http://pipe.test/r"

// script answers the i-th request (1-based) with steps[i-1], and every later
// one with the last step; it counts the requests it saw and the bodies.
type script struct {
	steps    []func(w http.ResponseWriter, r *http.Request)
	requests atomic.Int64
	mu       sync.Mutex
	bodies   []string
}

func newScript(steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	return &script{steps: steps}
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(s.requests.Add(1))
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	s.steps[min(n, len(s.steps))-1](w, r)
}

func (s *script) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// status answers code with a short body.
func status(code int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		if code == http.StatusOK {
			_, _ = io.WriteString(w, "ok")
			return
		}
		http.Error(w, http.StatusText(code), code)
	}
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}
