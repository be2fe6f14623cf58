package faultserver

import (
	"net"
	"sync"
	"sync/atomic"
)

// A TLSStall accepts TCP connections on loopback and never sends or reads a
// byte, so a client's TLS handshake hangs until its TLSHandshakeTimeout.
type TLSStall struct {
	ln       net.Listener
	accepted chan struct{}
	count    atomic.Int64
	done     chan struct{} // closed when the accept loop returned

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// maxStalled bounds the connections a TLSStall holds stalled.
var maxStalled = 256

// NewTLSStall starts a [TLSStall] on 127.0.0.1 with a system-chosen port.
// The caller must call [TLSStall.Close].
func NewTLSStall() (*TLSStall, error) {
	ln, err := listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &TLSStall{ln: ln, accepted: make(chan struct{}, signalCap), done: make(chan struct{})}
	go s.accept()
	return s, nil
}

func (s *TLSStall) accept() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed || len(s.conns) >= maxStalled {
			// Past maxStalled held, a connection is closed as accepted: a
			// stall needs one, not thousands.
			c.Close()
		} else {
			s.conns = append(s.conns, c)
		}
		s.mu.Unlock()
		s.count.Add(1)
		signal(s.accepted)
	}
}

// Addr returns the listening address, "host:port".
func (s *TLSStall) Addr() string { return s.ln.Addr().String() }

// URL returns "https://host:port".
func (s *TLSStall) URL() string { return "https://" + s.Addr() }

// ConnsAccepted returns how many TCP connections were accepted.
func (s *TLSStall) ConnsAccepted() int64 { return s.count.Load() }

// Accepted returns a channel that receives one value per accepted
// connection (buffered like [Server.Entered]), so a test can wait for the
// server to have taken a connection.
func (s *TLSStall) Accepted() <-chan struct{} { return s.accepted }

// Close stops accepting, closes the held connections and waits for the
// accept goroutine. It returns nil, also on a second call.
func (s *TLSStall) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
	<-s.done
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}
