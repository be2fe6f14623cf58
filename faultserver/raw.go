package faultserver

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// This file holds the listeners that fail below HTTP: a TLS handshake that
// never completes, a TCP connect that never completes, and a port on which
// nothing listens.

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

// NewTLSStall starts a [TLSStall] on 127.0.0.1 with a system-chosen port.
// The caller must call [TLSStall.Close].
func NewTLSStall() (*TLSStall, error) {
	ln, err := listenLoopback("127.0.0.1:0")
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
		if s.closed {
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

// A ConnectHang is a loopback address on which a TCP connect hangs until
// the client's dial timeout: a listener with a backlog of 0 that never
// accepts, whose accept queue is kept full by connections it dials and
// holds itself. Linux only (elsewhere the probe in [NewConnectHang] fails).
// No goroutine runs.
type ConnectHang struct {
	ln   net.Listener
	held []net.Conn
}

// connectProbe is how long NewConnectHang waits for a probe connect to
// complete before it takes the accept queue as full. A loopback connect to a
// listener with room completes in microseconds.
const connectProbe = 50 * time.Millisecond

// maxHeld bounds the connections NewConnectHang holds to fill the queue.
const maxHeld = 8

// NewConnectHang returns a [ConnectHang] on 127.0.0.1 with a system-chosen
// port. It re-listens with backlog 0, then dials connections and holds them
// until a probe connect no longer completes within 50 ms, so it takes about
// 50 ms. On Linux, whose accept queue admits backlog+1 connections, one held
// connection suffices; SYNs to the full queue are dropped (even with
// syncookies), and the client retransmits until its dial timeout. The
// caller must call [ConnectHang.Close].
func NewConnectHang() (*ConnectHang, error) {
	ln, err := listenLoopback("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &ConnectHang{ln: ln}
	if err := h.fill(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *ConnectHang) fill() error {
	tl, ok := h.ln.(*net.TCPListener)
	if !ok {
		return errors.New("faultserver: ConnectHang needs a TCP listener")
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return fmt.Errorf("faultserver: ConnectHang: %w", err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }); err != nil {
		return fmt.Errorf("faultserver: ConnectHang: %w", err)
	}
	if lerr != nil {
		return fmt.Errorf("faultserver: ConnectHang: listen backlog 0: %w", lerr)
	}
	d := net.Dialer{Timeout: connectProbe}
	for range maxHeld {
		c, err := d.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil // the queue is full: connects now hang
			}
			return fmt.Errorf("faultserver: ConnectHang: %w", err)
		}
		h.held = append(h.held, c)
	}
	return fmt.Errorf("faultserver: ConnectHang: accept queue still not full after %d connections", maxHeld)
}

// Addr returns the address whose connects hang, "host:port".
func (h *ConnectHang) Addr() string { return h.ln.Addr().String() }

// URL returns "http://host:port".
func (h *ConnectHang) URL() string { return "http://" + h.Addr() }

// Held returns how many connections fill the accept queue.
func (h *ConnectHang) Held() int { return len(h.held) }

// Close closes the held connections and the listener. It returns nil, also
// on a second call.
func (h *ConnectHang) Close() error {
	for _, c := range h.held {
		c.Close()
	}
	h.held = nil
	h.ln.Close()
	return nil
}

// ClosedPort returns a loopback address, "127.0.0.1:port", on which nothing
// listens, so a connect is refused (ECONNREFUSED): it listens on a
// system-chosen port and closes the listener. Another process could take the
// port afterwards; on a test machine that is rare.
func ClosedPort() (string, error) {
	ln, err := listenLoopback("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("faultserver: %w", err)
	}
	return addr, nil
}
