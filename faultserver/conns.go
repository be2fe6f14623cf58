package faultserver

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// trackingListener registers every accepted connection with the server.
type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.s.track(c), nil
}

// trackedConn is an accepted TCP connection with the state the faults need.
type trackedConn struct {
	net.Conn // *net.TCPConn
	id       uint64

	cut  atomic.Bool // the server itself closed (or half-closed) the connection
	done sync.Once   // Server.connDone

	mu      sync.Mutex
	perPath map[string]int // requests read per path

	s    *Server
	tls  bool // served over TLS
	peer peerState
}

// Read reads from the connection, noting a client's FIN or RST.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !c.cut.Load() {
		c.peer.sawPeer(err)
	}
	return n, err
}

// Write writes to the connection, noting a client's RST.
func (c *trackedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !c.cut.Load() {
		c.peer.sawPeer(err)
	}
	return n, err
}

// Close closes the connection and, the first time, reports who closed it
// first to the server's event hook.
func (c *trackedConn) Close() error {
	if c.s == nil || c.s.cfg.events == nil {
		return c.Conn.Close()
	}
	c.peer.mu.Lock()
	first := !c.peer.closed
	known := c.peer.how != "" || c.peer.server
	c.peer.mu.Unlock()
	if c.cut.Load() {
		c.peer.serverFirst()
	}
	if first && !known && c.tls {
		c.peer.probePeer(c, 2*time.Millisecond)
	}
	c.peer.mu.Lock()
	first = !c.peer.closed
	c.peer.closed = true
	by, how := "client", c.peer.how
	if how == "" || c.peer.server {
		by, how = "server", "fin"
		if c.peer.reset {
			how = "rst"
		}
	}
	c.peer.mu.Unlock()
	err := c.Conn.Close()
	if first {
		c.s.emit(ConnEvent{Kind: ConnClosed, Conn: c.id, At: time.Now(), ClosedBy: by, How: how})
	}
	return err
}

// countRequest counts a request for path and returns the count so far.
func (c *trackedConn) countRequest(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perPath == nil {
		c.perPath = make(map[string]int)
	}
	c.perPath[path]++
	return c.perPath[path]
}

// CloseWrite half-closes the TCP connection (sends FIN). The standard
// library's HTTP server finds it through this method too.
func (c *trackedConn) CloseWrite() error {
	c.peer.serverFirst()
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return c.Conn.Close()
}

// reset closes the connection with a TCP RST.
func (c *trackedConn) reset() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.peer.mu.Lock()
	c.peer.reset = true
	c.peer.mu.Unlock()
	return c.Close()
}

// trackedOf returns the trackedConn under c, which is one or a *tls.Conn
// wrapping one.
func trackedOf(c net.Conn) *trackedConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tc, _ := c.(*trackedConn)
	return tc
}

type connKey struct{}

// withConn is the standard server's ConnContext hook: it puts the
// trackedConn in every request's context.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, trackedOf(c))
}

func connFrom(ctx context.Context) *trackedConn {
	tc, _ := ctx.Value(connKey{}).(*trackedConn)
	return tc
}
