package faultserver

import (
	"context"
	"crypto/tls"
	"io"
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
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.full() {
			// Past maxOpenConns: shed, as a server out of capacity does.
			l.s.accepted.Add(1)
			c.Close()
			continue
		}
		return l.s.track(c), nil
	}
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

	// What the connection does after a response (after.go).
	fmu          sync.Mutex
	pending      *plan    // left by a handler, started by responded
	wire         *plan    // armed CloseBeforeRead: the next bytes trip it
	darkNext     *plan    // go dark after the next write (HTTP/2)
	mode         connMode // what reads do
	modePlan     *plan    // the plan of the dark or the drain
	until        time.Time
	counted      bool // the drain's unread request is counted
	closedByHTTP bool // the HTTP server closed the connection while it was dark
	idleTimer    *time.Timer
	idleGen      uint64 // invalidates idle timers that fired late
	idlePlan     *plan
	idleRead     bool // bytes arrived since the idle timer started
}

// Read reads from the connection, noting a client's FIN or RST. On a
// connection a fault has doomed it may read and discard instead (after.go).
func (c *trackedConn) Read(p []byte) (int, error) {
	c.fmu.Lock()
	mode := c.mode
	c.fmu.Unlock()
	switch mode {
	case modeDark:
		return 0, c.readDark()
	case modeDrain:
		return 0, c.readDrain()
	case modeOver:
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	if held, err := c.arrived(n, err); held {
		return 0, err
	}
	if err != nil && !c.cut.Load() {
		c.peer.sawPeer(err)
	}
	return n, err
}

// Write writes to the connection, noting a client's RST. A dark
// connection writes nothing.
func (c *trackedConn) Write(p []byte) (int, error) {
	if c.writeDark() {
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	if err != nil && !c.cut.Load() {
		c.peer.sawPeer(err)
	}
	return n, err
}

// Close closes the connection, unless it is dark: a dark connection stays
// open until the client closes it, the server cuts it or its bound passes.
func (c *trackedConn) Close() error {
	if c.isDark() {
		return nil
	}
	return c.closeNow()
}

// closeNow closes the connection and, the first time, reports who closed
// it first to the server's event hook. A dark connection's dark ends with
// it, and if the HTTP server is done with it, the server is told.
func (c *trackedConn) closeNow() error {
	first, by, how := false, "", ""
	if c.s != nil && c.s.cfg.events != nil {
		c.fmu.Lock()
		normal := c.mode == modeNormal // else a dark or a drain owns the reads
		c.fmu.Unlock()
		c.peer.mu.Lock()
		first = !c.peer.closed
		known := c.peer.how != "" || c.peer.server
		c.peer.mu.Unlock()
		if c.cut.Load() {
			c.peer.serverFirst()
		}
		if first && !known && c.tls && normal {
			c.peer.probePeer(c, 2*time.Millisecond)
		}
		c.peer.mu.Lock()
		first = !c.peer.closed
		c.peer.closed = true
		by, how = "client", c.peer.how
		if how == "" || c.peer.server {
			by, how = "server", "fin"
			if c.peer.reset {
				how = "rst"
			}
		}
		c.peer.mu.Unlock()
	}
	c.fmu.Lock()
	c.stopIdleLocked()
	release := c.mode == modeDark && c.closedByHTTP
	c.mode = modeOver
	c.fmu.Unlock()
	err := c.Conn.Close()
	if first {
		c.s.emit(ConnEvent{Kind: ConnClosed, Conn: c.id, At: time.Now(), ClosedBy: by, How: how})
	}
	if release {
		c.s.connDone(c)
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
	return c.closeNow()
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
