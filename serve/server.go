package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/loopback"
)

// Limits of a server, per session and in all (docs/serve.md, "Limits").
const (
	maxSessions        = 64
	maxConnsPerSession = 256
	maxReqsPerSession  = 4096
	maxBody            = 64 << 10
	maxMessage         = 1 << 10
	maxName            = 200
	idleSession        = 2 * time.Minute
)

// A Server serves the fault catalogue to kits: a control API speaking
// [Protocol] and the fault listeners it points them to. Build it with
// [New]; stop it with [Server.Close]. Its methods are safe for concurrent
// use.
type Server struct {
	cfg    config
	ctl    net.Listener
	http   *http.Server
	faults [3]*faultserver.Server // onPlain, onTLS, onRawH2
	caPEM  []byte
	cert   tls.Certificate
	specs  []*spec
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// key is the secret the control API's paths begin with
	// (/k/{key}/v1/…): only who was given CONNAUDIT_URL has it.
	key  string
	ends endings

	mu       sync.Mutex
	sessions map[string]*session
	conns    map[connRef]*connRec // connections of the fault listeners, by listener and id
	next     int
	closed   bool
}

// connRef names a connection of one of the fault listeners.
type connRef struct {
	on listener
	id uint64
}

// New starts a server: the control API on the address of [Addr]
// (127.0.0.1 with a free port by default) and the fault listeners on
// 127.0.0.1. The caller must call [Server.Close].
func New(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0", serverIdle: defaultServerIdle}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("serve: nil option")
		}
		o.apply(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	s := &Server{cfg: cfg, specs: catalogue(cfg.sourceNumbers), key: newKey(), sessions: map[string]*session{},
		conns: map[connRef]*connRec{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var err error
	s.cert, s.caPEM, err = newCA()
	if err != nil {
		return nil, err
	}
	modes := [3][]faultserver.Option{
		nil,
		{faultserver.Certificate(s.cert)},
		{faultserver.Certificate(s.cert), faultserver.RawHTTP2()},
	}
	for i, m := range modes {
		on := listener(i)
		opts := append(m, faultserver.OnConnEvent(func(ev faultserver.ConnEvent) { s.connEvent(on, ev) }))
		if s.faults[i], err = faultserver.New(opts...); err != nil {
			s.closeFaults()
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	if cfg.anyAddr {
		s.ctl, err = net.Listen("tcp", cfg.addr)
	} else {
		s.ctl, err = loopback.Listen(cfg.addr)
	}
	if err != nil {
		s.closeFaults()
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.http = &http.Server{Handler: s.access(s.routes()), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.http.Serve(s.ctl)
	}()
	go func() {
		defer s.wg.Done()
		s.reapIdle()
	}()
	return s, nil
}

// URL returns the control API's base URL, CONNAUDIT_URL:
// "http://host:port/k/{key}", whose path holds the server's secret key
// (docs/serve.md, "Who may use the control API"). Give it only to the
// kits that are to use the server.
func (s *Server) URL() string { return "http://" + s.ctl.Addr().String() + "/k/" + s.key }

// CA returns the PEM of the CA certificate that signs every HTTPS fault
// listener: CONNAUDIT_CA's content.
func (s *Server) CA() []byte { return append([]byte(nil), s.caPEM...) }

// Close ends every open session (their reports go to [OnSessionEnd]'s
// functions), waits for every session ending to be delivered, stops the
// control API and the fault listeners, and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var open []*session
	for _, se := range s.sessions {
		open = append(open, se)
	}
	s.mu.Unlock()
	var ends sync.WaitGroup
	for _, se := range open {
		ends.Go(func() { s.end(se, "the server stopped before the kit said done") })
	}
	ends.Wait()
	s.ends.pending.Wait() // sessions a kit's done or the reaper was ending
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	s.wg.Wait()
	s.closeFaults()
	return nil
}

func (s *Server) closeFaults() {
	for _, f := range s.faults {
		if f != nil {
			f.Close() // a handler cut here is a kit gone mid-scenario: said in its session
		}
	}
}

// reapIdle ends the sessions idle for longer than idleSession.
func (s *Server) reapIdle() {
	t := time.NewTicker(idleSession / 8)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var idle []*session
		for _, se := range s.sessions {
			se.mu.Lock()
			if time.Since(se.touched) > idleSession {
				idle = append(idle, se)
			}
			se.mu.Unlock()
		}
		s.mu.Unlock()
		for _, se := range idle {
			s.end(se, fmt.Sprintf("abandoned: no request from the kit for %v", idleSession))
		}
	}
}

// newCA returns the certificate every HTTPS fault listener serves, for
// 127.0.0.1, ::1 and localhost, and the PEM of the fresh CA that signed it
// (the CA alone: what a kit trusts).
func newCA() (tls.Certificate, []byte, error) {
	ca, err := loopback.NewCA("connaudit serve", "connaudit serve CA")
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serve: %w", err)
	}
	cert, err := ca.Leaf("localhost", nil)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serve: %w", err)
	}
	return cert, ca.PEM(), nil
}
