package faultserver

import (
	"errors"
	"io"
	"net"
	"time"
)

// This file is what a connection does once a response is written, for the
// faults that doom it: CloseBeforeRead's tripwire, GoDark's darkness, the
// closes of RequestLimit and IdleClose. On the standard server a handler
// leaves a plan on its connection (trackedConn.plan) and the plan starts
// when the server reports the connection idle (trackedConn.responded), that
// is once the response is written; the raw HTTP/2 server starts them itself.

// planKind is what a connection does after a response.
type planKind int

const (
	planUnread planKind = iota + 1 // CloseBeforeRead: close on the next request's first bytes
	planDark                       // GoDark: go dark
	planClose                      // RequestLimit without Announce: close now
	planIdle                       // IdleClose: close once idle for plan.idle
)

// A plan is what a fault asks of its connection after its response.
type plan struct {
	kind  planKind
	ep    *endpoint // the endpoint whose fault armed the connection
	path  string
	reset bool          // planUnread: an RST instead of a FIN
	idle  time.Duration // planIdle
	h2    bool          // the response was HTTP/2 (the standard server's)
	// count: bytes that arrive after the server's FIN are a request (plain
	// HTTP/1, raw HTTP/2 frames); under TLS, on the standard server, they
	// may as well be the client's close_notify and are neither counted nor
	// reported.
	count bool
}

// connMode is what reads on a connection do.
type connMode int

const (
	modeNormal connMode = iota // reads deliver what they read
	modeDark                   // reads discard everything until the dark ends
	modeDrain                  // after the server's FIN: reads discard until EOF or drainBound
	modeOver                   // the dark or the drain ended: reads return EOF
)

// The bounds; variables for the package's own tests.
var (
	// drainBound bounds how long the server reads what a client still
	// sends after the server's FIN.
	drainBound = 2 * time.Second
	// darkBound bounds how long a connection stays dark.
	darkBound = 60 * time.Second
)

// plan leaves p on the connection, to start once the response is written.
// An HTTP/1 dark starts with the write of the response itself (the
// handler's whole response is one write, after the handler returns): over
// TLS the server's background read would otherwise take the client's next
// request into the TLS layer's buffer before the server reports the
// connection idle.
func (c *trackedConn) plan(p *plan) {
	c.fmu.Lock()
	if p.kind == planDark && !p.h2 {
		c.darkNext = p
	} else {
		c.pending = p
	}
	c.fmu.Unlock()
}

// responded starts the plan a handler left, once the standard server
// reports the connection idle: over HTTP/1 the response has been written
// (a client's next request may already be on its way: its bytes are the
// next read); over HTTP/2 the last open stream's END_STREAM is about to be
// (the next write carries it).
func (c *trackedConn) responded() {
	c.fmu.Lock()
	p := c.pending
	c.pending = nil
	if p == nil || c.mode != modeNormal {
		c.fmu.Unlock()
		return
	}
	switch p.kind {
	case planUnread:
		c.wire = p
	case planDark: // HTTP/2: the next write carries the END_STREAM
		c.darkNext = p
	case planClose:
		ok := c.drainLocked(p)
		c.fmu.Unlock()
		if ok {
			c.finish()
		}
		return
	case planIdle:
		c.idleLocked(p)
	}
	c.fmu.Unlock()
}

// active notes that a request (HTTP/1) or a stream (HTTP/2) is in progress:
// the connection is not idle.
func (c *trackedConn) active() {
	c.fmu.Lock()
	c.stopIdleLocked()
	c.fmu.Unlock()
}

// arrived is called by Read once a read in normal mode returned n bytes or
// err, the mode having perhaps changed meanwhile; it returns true if what
// was read must not be delivered, and then what Read returns instead.
func (c *trackedConn) arrived(n int, err error) (bool, error) {
	c.fmu.Lock()
	switch {
	case c.mode == modeDark:
		// The read in flight when the connection went dark.
		p := c.modePlan
		c.fmu.Unlock()
		if n > 0 {
			c.unreadEvent(p)
		}
		if err != nil && !isTimeout(err) {
			if !c.cut.Load() {
				c.peer.sawPeer(err)
			}
			c.endDark()
			return true, err
		}
		return true, c.readDark()
	case n == 0:
		// An error, delivered as it is (after the server's FIN, the
		// client's close or the drain's bound).
	case c.mode == modeDrain:
		p := c.drainedLocked()
		c.fmu.Unlock()
		c.unreadEvent(p)
		return true, c.readDrain()
	case c.mode == modeOver:
		c.fmu.Unlock()
		return true, io.EOF
	case c.wire != nil:
		p := c.wire
		c.wire = nil
		c.fmu.Unlock()
		return true, c.trip(p)
	case c.idleTimer != nil:
		c.idleRead = true
	}
	c.fmu.Unlock()
	return false, nil
}

// trip closes the connection on the request whose first bytes just
// arrived, without reading it (CloseBeforeRead).
func (c *trackedConn) trip(p *plan) error {
	c.cut.Store(true)
	p.ep.unread.Add(1)
	c.unreadEvent(p)
	if p.reset {
		c.fmu.Lock()
		c.mode = modeOver
		c.fmu.Unlock()
		c.reset()
		return net.ErrClosed
	}
	c.fmu.Lock()
	ok := c.drainLocked(p)
	c.counted = true // this request is the one counted
	c.fmu.Unlock()
	if ok {
		c.finish()
	}
	return c.readDrain()
}

// drainLocked switches a normal connection to draining after the server's
// FIN; the caller sends the FIN with finish if it returns true.
func (c *trackedConn) drainLocked(p *plan) bool {
	if c.mode != modeNormal {
		return false
	}
	c.mode, c.modePlan, c.counted = modeDrain, p, false
	c.until = time.Now().Add(drainBound)
	c.wire, c.darkNext = nil, nil
	c.stopIdleLocked()
	return true
}

// finish sends the server's FIN and bounds the reads in flight.
func (c *trackedConn) finish() {
	c.cut.Store(true)
	c.CloseWrite()
	c.fmu.Lock()
	until := c.until
	c.fmu.Unlock()
	c.Conn.SetReadDeadline(until)
}

// drainedLocked counts, once per drain, the request that arrived after the
// server's FIN, and returns the plan to report it for (outside the lock:
// the hook may call the server), or nil.
func (c *trackedConn) drainedLocked() *plan {
	p := c.modePlan
	if c.counted || p == nil || !p.count {
		return nil
	}
	c.counted = true
	p.ep.unread.Add(1)
	return p
}

// readDrain reads and discards until the client closes or the drain's
// bound passes, then reports EOF.
func (c *trackedConn) readDrain() error {
	var buf [4096]byte
	for {
		c.fmu.Lock()
		mode, until := c.mode, c.until
		c.fmu.Unlock()
		if mode != modeDrain || !time.Now().Before(until) {
			break
		}
		c.Conn.SetReadDeadline(until)
		n, err := c.Conn.Read(buf[:])
		if n > 0 {
			c.fmu.Lock()
			p := c.drainedLocked()
			c.fmu.Unlock()
			c.unreadEvent(p)
		}
		if err != nil && !isTimeout(err) {
			break
		}
	}
	c.fmu.Lock()
	if c.mode == modeDrain {
		c.mode = modeOver
	}
	c.fmu.Unlock()
	return io.EOF
}

// goDark makes the connection dark (GoDark).
func (c *trackedConn) goDark(p *plan) {
	c.fmu.Lock()
	if c.mode != modeNormal {
		c.fmu.Unlock()
		return
	}
	c.mode, c.modePlan = modeDark, p
	c.until = time.Now().Add(darkBound)
	c.wire, c.darkNext = nil, nil
	c.stopIdleLocked()
	until := c.until
	c.fmu.Unlock()
	p.ep.dark.Add(1)
	c.Conn.SetReadDeadline(until) // bounds a read in flight too
}

// readDark reads and discards until the client closes the connection, the
// server cuts it or darkBound passes; then the connection is closed.
func (c *trackedConn) readDark() error {
	var buf [4096]byte
	for {
		c.fmu.Lock()
		mode, until, p := c.mode, c.until, c.modePlan
		c.fmu.Unlock()
		if mode != modeDark {
			return io.EOF
		}
		if !time.Now().Before(until) {
			c.cut.Store(true) // the bound: the server closes
			c.endDark()
			return io.EOF
		}
		c.Conn.SetReadDeadline(until)
		n, err := c.Conn.Read(buf[:])
		if n > 0 {
			c.unreadEvent(p)
		}
		if err != nil && !isTimeout(err) {
			if !c.cut.Load() {
				c.peer.sawPeer(err)
			}
			c.endDark()
			return err
		}
	}
}

// endDark closes a dark connection (closeNow ends its dark).
func (c *trackedConn) endDark() {
	c.closeNow()
}

// holdOpen reports whether the connection is dark, and if so notes that
// the HTTP server is done with it: the dark's end releases it.
func (c *trackedConn) holdOpen() bool {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.mode != modeDark {
		return false
	}
	c.closedByHTTP = true
	return true
}

// isDark reports whether the connection is dark.
func (c *trackedConn) isDark() bool {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.mode == modeDark
}

// writeDark reports whether a write must be swallowed: the connection is
// dark. A dark that waited for the write of the last response (HTTP/2)
// starts now, before that write goes out, so that nothing the client sends
// once it has the response is delivered.
func (c *trackedConn) writeDark() bool {
	c.fmu.Lock()
	mode, p := c.mode, c.darkNext
	c.darkNext = nil
	c.fmu.Unlock()
	if mode == modeDark {
		return true
	}
	if p != nil {
		c.goDark(p)
	}
	return false
}

// idleLocked starts the idle timer of IdleClose.
func (c *trackedConn) idleLocked(p *plan) {
	c.stopIdleLocked()
	c.idleGen++
	gen := c.idleGen
	c.idlePlan, c.idleRead = p, false
	c.idleTimer = time.AfterFunc(p.idle, func() { c.idleFired(gen) })
}

func (c *trackedConn) stopIdleLocked() {
	if c.idleTimer != nil {
		c.idleTimer.Stop()
		c.idleTimer = nil
	}
	c.idleGen++
}

// idleFired closes the connection if it stayed idle.
func (c *trackedConn) idleFired(gen uint64) {
	c.fmu.Lock()
	if gen != c.idleGen || c.mode != modeNormal {
		c.fmu.Unlock()
		return
	}
	p := c.idlePlan
	if c.idleRead {
		// Bytes arrived: over HTTP/1 a request is in progress, and the
		// server reports the connection idle again after its response;
		// over HTTP/2 they may be a PING: wait Idle again.
		c.idleRead = false
		if p.h2 {
			c.idleTimer.Reset(p.idle)
		} else {
			c.idleTimer = nil
		}
		c.fmu.Unlock()
		return
	}
	c.idleTimer = nil
	ok := c.drainLocked(p)
	c.fmu.Unlock()
	if ok {
		c.finish()
	}
}

// unreadEvent reports bytes left unread on a connection p doomed.
func (c *trackedConn) unreadEvent(p *plan) {
	if c.s == nil || p == nil {
		return
	}
	c.s.emit(ConnEvent{Kind: ConnUnread, Conn: c.id, At: time.Now(), Path: p.path})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
