package faultserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/text"
)

// The bounds on what a server's connections hold, resources rather than
// faults: a connection that sends no request header (its TLS handshake
// included) within headerBound is closed, and one of the raw HTTP/2
// server that sits idle with no stream open for idleBound; past
// maxOpenConns open connections a new one is closed as soon as it is
// accepted (counted in [Server.Totals] ConnsAccepted all the same).
var (
	headerBound  = 30 * time.Second
	idleBound    = 2 * time.Minute
	maxOpenConns = 1024
)

// A Server is a fault-injecting HTTP server listening on a loopback address.
// Create it with [NewUnstarted] or [New]; map paths to faults with
// [Server.Handle]; stop it with [Server.Close]. All methods are safe for
// concurrent use.
type Server struct {
	cfg  config
	ln   net.Listener // the TCP listener
	addr string
	root *x509.Certificate // what a client trusts; nil without TLS
	cert tls.Certificate

	closing   chan struct{} // closed when Close starts
	serveDone chan struct{} // closed when the accept loop has returned
	connWG    sync.WaitGroup
	accepted  atomic.Int64

	mu        sync.Mutex
	started   bool
	closed    bool
	httpSrv   *http.Server // standard modes, once started
	endpoints map[string]*endpoint
	conns     map[*trackedConn]struct{} // accepted and not yet done
	nextID    uint64
	inflight  map[*trackedConn]int // running handlers per connection
	changes   notify.Changes       // signalled whenever a handler exits or a connection is done
}

// NewUnstarted returns a [Server] listening on 127.0.0.1 with a
// system-chosen port (or on the address given by [Addr]) but not yet
// serving: connections wait in the listen queue until [Server.Start]. It
// refuses any address that is not loopback. The caller must call
// [Server.Close].
func NewUnstarted(opts ...Option) (*Server, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	ln, err := listen(cfg.addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		ln:        ln,
		addr:      ln.Addr().String(),
		closing:   make(chan struct{}),
		serveDone: make(chan struct{}),
		endpoints: make(map[string]*endpoint),
		conns:     make(map[*trackedConn]struct{}),
		inflight:  make(map[*trackedConn]int),
	}
	if cfg.cert != nil {
		s.cert = *cfg.cert
		if s.root, err = root(s.cert); err != nil {
			ln.Close()
			return nil, fmt.Errorf("faultserver: Certificate: %v", err)
		}
	} else if cfg.tls {
		s.cert, s.root, err = issue(ln.Addr().(*net.TCPAddr).IP)
		if err != nil {
			ln.Close()
			return nil, err
		}
	}
	return s, nil
}

// listen listens on the loopback address addr (see [Addr]).
func listen(addr string) (net.Listener, error) {
	ln, err := loopback.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("faultserver: %w", err)
	}
	return ln, nil
}

// New returns a started [Server]: [NewUnstarted] followed by [Server.Start].
// The caller must call [Server.Close].
func New(opts ...Option) (*Server, error) {
	s, err := NewUnstarted(opts...)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Handle makes the endpoint path (matched exactly against the request
// path, without query) answer with f, replacing any previous fault and
// restarting its [Sequence]. It may be called before or after Start. A path
// without a handler answers 404. A pointer to a fault is used as the fault it
// points to.
//
// Handle panics, like http.ServeMux.Handle, if path does not start with "/"
// or if f is nil, malformed (e.g. CloseMidBody with Send >= Length), or not
// supported in the server's mode ([GoAway] and [RSTStream] need
// [RawHTTP2], which in turn does not support [Trickle]).
func (s *Server) Handle(path string, f Fault) {
	if path == "" || path[0] != '/' {
		panic(fmt.Sprintf("faultserver: Handle: path %q does not start with /", path))
	}
	f, err := normalize(f)
	if err == nil {
		err = f.validate(mode{raw: s.cfg.rawH2, tls: s.cfg.tls, h2only: s.cfg.h2only})
	}
	if err != nil {
		panic(fmt.Sprintf("faultserver: Handle(%q): %v", path, err))
	}
	s.endpoint(path).setFault(f)
}

// normalize dereferences pointers to faults, in a Sequence too.
func normalize(f Fault) (Fault, error) {
	v := reflect.ValueOf(f)
	if !v.IsValid() {
		return nil, errors.New("nil Fault")
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, errors.New("nil Fault")
		}
		f = v.Elem().Interface().(Fault)
	}
	if seq, ok := f.(Sequence); ok {
		faults := make([]Fault, len(seq.Faults))
		for i, g := range seq.Faults {
			g, err := normalize(g)
			if err != nil {
				return nil, fmt.Errorf("Sequence.Faults[%d]: %w", i, err)
			}
			faults[i] = g
		}
		f = Sequence{Faults: faults}
	}
	return f, nil
}

// Start starts serving. It fails if the server was already started or
// closed.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("faultserver: Start after Close")
	case s.started:
		return errors.New("faultserver: Start called twice")
	}
	s.started = true
	var ln net.Listener = &trackingListener{Listener: s.ln, s: s}
	var tcfg *tls.Config
	if s.cfg.tls {
		protos := []string{"h2", "http/1.1"}
		if s.cfg.h2only {
			protos = []string{"h2"}
		}
		tcfg = &tls.Config{
			Certificates: []tls.Certificate{s.cert},
			NextProtos:   protos,
			MinVersion:   tls.VersionTLS12,
		}
	}
	if s.cfg.rawH2 {
		go s.acceptRawH2(ln, tcfg)
		return nil
	}
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	srv := &http.Server{
		Handler:     http.HandlerFunc(s.serveHTTP),
		ConnState:   s.connState,
		ConnContext: withConn,
		ErrorLog:    log.New(io.Discard, "", 0),
		// Resources, not faults: a connection that sends no request
		// header (a TLS handshake included) within headerBound is
		// closed. No IdleTimeout: the HTTP/2 server's idle timer outlives
		// its connection (TestChaosSoak's heap grew by 3.7 MB of them);
		// maxOpenConns bounds kept-alive connections instead.
		ReadHeaderTimeout: headerBound,
	}
	if s.cfg.h2only {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP2(true)
	}
	s.httpSrv = srv
	go func() {
		defer close(s.serveDone)
		srv.Serve(ln)
	}()
	return nil
}

// URL returns the base URL of the server, "http://host:port" or
// "https://host:port", with no trailing slash.
func (s *Server) URL() string {
	if s.cfg.tls {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// Addr returns the address the server listens on, as "host:port".
func (s *Server) Addr() string { return s.addr }

// ClientTLSConfig returns a new TLS configuration that trusts the CA of the
// server's certificate (the last of its chain), with ServerName set to the server's host, or nil for a plain
// HTTP server. Each call returns a fresh copy the caller may modify. Give it
// to http.Transport.TLSClientConfig, and set ForceAttemptHTTP2 to use HTTP/2.
func (s *Server) ClientTLSConfig() *tls.Config {
	if s.root == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.root)
	host, _, _ := net.SplitHostPort(s.addr)
	return &tls.Config{RootCAs: pool, ServerName: host}
}

// endpoint returns the state of path, creating it.
func (s *Server) endpoint(path string) *endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	ep := s.endpoints[path]
	if ep == nil {
		ep = newEndpoint()
		s.endpoints[path] = ep
	}
	return ep
}

// Counters returns a snapshot of the counters of the endpoint path (zero if
// it never saw a request).
func (s *Server) Counters(path string) Counters {
	s.mu.Lock()
	ep := s.endpoints[path]
	s.mu.Unlock()
	if ep == nil {
		return Counters{}
	}
	return ep.snapshot()
}

// IdempotencyKeys returns the idempotency keys that requests to the [Write]
// endpoint path carried, in the order received, duplicates included (the
// first 4096): a client that keeps its key across retries shows one key
// twice, one that makes a new key per attempt shows two.
func (s *Server) IdempotencyKeys(path string) []string {
	s.mu.Lock()
	ep := s.endpoints[path]
	s.mu.Unlock()
	if ep == nil {
		return nil
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]string(nil), ep.recv...)
}

// Totals returns the sum of all endpoints' counters, except ConnsAccepted,
// which counts every TCP connection the server accepted.
func (s *Server) Totals() Counters {
	s.mu.Lock()
	eps := make([]*endpoint, 0, len(s.endpoints))
	for _, ep := range s.endpoints {
		eps = append(eps, ep)
	}
	s.mu.Unlock()
	var t Counters
	for _, ep := range eps {
		c := ep.snapshot()
		t.RequestsRead += c.RequestsRead
		t.HandlersEntered += c.HandlersEntered
		t.CancelsObserved += c.CancelsObserved
		t.WritesCommitted += c.WritesCommitted
		t.Unread += c.Unread
		t.DarkConns += c.DarkConns
	}
	t.ConnsAccepted = s.accepted.Load()
	return t
}

// Entered returns a channel that receives one value each time a handler for
// path is entered (see [Counters].HandlersEntered), so a test can wait for
// the Nth entry by receiving N values. The channel is the same for every call
// with the same path, may be obtained before the first request, is never
// closed, and is buffered: a handler never blocks on it. Values beyond 4096
// unreceived ones are dropped (the counters stay exact).
func (s *Server) Entered(path string) <-chan struct{} {
	return s.endpoint(path).entered
}

// CancelObserved returns a channel that receives one value each time a
// handler for path observed its client go away while it waited (see
// [Counters].CancelsObserved). The value is sent after the handler has
// finished, so once it is received Close does not report that handler as
// running. Same buffering rules as [Server.Entered].
func (s *Server) CancelObserved(path string) <-chan struct{} {
	return s.endpoint(path).canceled
}

// full reports whether maxOpenConns connections are open.
func (s *Server) full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) >= maxOpenConns
}

// track registers a newly accepted connection.
func (s *Server) track(c net.Conn) *trackedConn {
	s.accepted.Add(1)
	s.connWG.Add(1)
	s.mu.Lock()
	s.nextID++
	tc := &trackedConn{Conn: c, id: s.nextID, s: s, tls: s.cfg.tls}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	// Outside the lock: the hook may call the server back.
	s.emit(ConnEvent{Kind: ConnAccepted, Conn: tc.id, At: time.Now()})
	return tc
}

// connDone marks tc as no longer needing Close's attention: closed, or
// hijacked by a fault (which closes it before its handler returns).
func (s *Server) connDone(tc *trackedConn) {
	tc.done.Do(func() {
		s.mu.Lock()
		delete(s.conns, tc)
		s.changes.Signal()
		s.mu.Unlock()
		s.connWG.Done()
	})
}

// connState is the standard server's ConnState hook. Over HTTP/2 it is
// called from the connection's serving goroutine, StateIdle once the last
// open stream's END_STREAM is written into the connection's buffer and
// before that buffer is flushed.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	tc := trackedOf(c)
	if tc == nil {
		return
	}
	switch st {
	case http.StateIdle:
		tc.responded()
	case http.StateActive:
		tc.active()
	case http.StateClosed, http.StateHijacked:
		if !tc.holdOpen() {
			s.connDone(tc)
		}
	}
}

// enter registers a running handler on tc; it fails once Close started.
func (s *Server) enter(tc *trackedConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight[tc]++
	return true
}

// exit unregisters a handler registered by enter.
func (s *Server) exit(tc *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[tc]--; s.inflight[tc] <= 0 {
		delete(s.inflight, tc)
	}
	s.changes.Signal()
}

// waitHandlers waits until no handler runs on a connection matched by on
// (all if on is nil), or until timeout fires (never if nil). It reports
// whether the handlers finished.
func (s *Server) waitHandlers(on map[*trackedConn]bool, timeout <-chan time.Time) bool {
	for {
		s.mu.Lock()
		busy := false
		for tc := range s.inflight {
			if on == nil || on[tc] {
				busy = true
				break
			}
		}
		if !busy {
			s.mu.Unlock()
			return true
		}
		ch := s.changes.Next()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			return false
		}
	}
}

// read records a request for path read on tc and returns its endpoint, the
// fault that serves it (nil: no handler) and how many requests for path tc
// has delivered, this one included.
func (s *Server) read(path string, tc *trackedConn) (*endpoint, Fault, int) {
	ep := s.endpoint(path)
	n := tc.countRequest(path)
	s.emit(ConnEvent{Kind: ConnRequest, Conn: tc.id, At: time.Now(), Path: path})
	return ep, ep.read(tc.id), n
}

// isClosing reports whether Close has started.
func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// closeConns closes every registered connection, marking each as cut by the
// server, and returns them.
func (s *Server) closeConns() map[*trackedConn]bool {
	s.mu.Lock()
	conns := make(map[*trackedConn]bool, len(s.conns))
	for tc := range s.conns {
		conns[tc] = true
	}
	s.mu.Unlock()
	for tc := range conns {
		tc.cut.Store(true)
		tc.closeNow()
	}
	return conns
}

// CloseClientConnections closes every open connection to the server, like
// httptest.Server's, and waits (at most 5 seconds) until the handlers that
// were running on them have returned. Handlers do not count this as a
// client cancellation.
func (s *Server) CloseClientConnections() {
	conns := s.closeConns()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	s.waitHandlers(conns, t.C)
}

// A CloseError is returned by [Server.Close] when it had to cut work in
// progress: handlers that were still running, and the connections they
// were running on. Idle connections are closed silently.
//
// A handler counts as running from its entry until just before its last
// action the client can observe (the last body byte, the close, the
// reset), so a client that has seen a fault's outcome never finds its
// handler reported. What Close cuts is thus a handler waiting in [Hang],
// [StallMidBody] or [Trickle], or, on the standard server, one blocked
// writing a body its client does not read.
type CloseError struct {
	ActiveConns     int // connections with a running handler
	RunningHandlers int // handlers (HTTP/2 streams) still running
}

// Error says what Close cut, e.g. "faultserver: Close cut 1 active
// connection, 1 handler still running".
func (e *CloseError) Error() string {
	return fmt.Sprintf("faultserver: Close cut %s, %s still running",
		text.Plural(e.ActiveConns, "active connection"), text.Plural(e.RunningHandlers, "handler"))
}

// Close stops the server: it stops accepting, releases every waiting
// handler, closes every connection and waits for every goroutine the server
// started (and for the standard server's connection goroutines) to end. It
// returns a [*CloseError] if handlers were still running when it was called,
// and nil otherwise, or on a second call.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	report := CloseError{ActiveConns: len(s.inflight)}
	for _, n := range s.inflight {
		report.RunningHandlers += n
	}
	started, srv := s.started, s.httpSrv
	s.mu.Unlock()

	close(s.closing)
	if !started {
		s.ln.Close()
		return nil
	}
	if srv != nil {
		srv.Close()
	} else {
		s.ln.Close()
	}
	<-s.serveDone // no connection is registered after this
	s.closeConns()
	s.connWG.Wait()
	s.waitHandlers(nil, nil)
	if report.RunningHandlers > 0 {
		return &report
	}
	return nil
}
