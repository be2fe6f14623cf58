package faultserver

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// A ConnectHang is a loopback address on which a TCP connect hangs until
// the client's dial timeout: a listener with a backlog of 0 that never
// accepts, whose accept queue is kept full by connections it dials and
// holds itself. Linux only (elsewhere the probe in [NewConnectHang] fails).
// No goroutine runs.
type ConnectHang struct {
	ln net.Listener

	mu   sync.Mutex
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
	ln, err := listen("127.0.0.1:0")
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
		h.mu.Lock()
		h.held = append(h.held, c)
		h.mu.Unlock()
	}
	return fmt.Errorf("faultserver: ConnectHang: accept queue still not full after %d connections", maxHeld)
}

// Addr returns the address whose connects hang, "host:port".
func (h *ConnectHang) Addr() string { return h.ln.Addr().String() }

// URL returns "http://host:port".
func (h *ConnectHang) URL() string { return "http://" + h.Addr() }

// Held returns how many connections fill the accept queue.
func (h *ConnectHang) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// Close closes the held connections and the listener. It returns nil, also
// on a second call.
func (h *ConnectHang) Close() error {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
	h.ln.Close()
	return nil
}
