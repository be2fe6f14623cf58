package pool

import (
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
)

// connLocked returns the open or dialing connection id, or nil. The last
// one looked up is at hand without a map lookup: a request's events, and
// the next request's on a kept-alive connection, concern the same one.
func (p *Pool) connLocked(id uint64) *connState {
	if c := p.lastConn; c != nil && c.ID == id {
		return c
	}
	c := p.conns[id]
	if c != nil {
		p.lastConn = c
	}
	return c
}

// forgetConnLocked removes c from the open and dialing connections.
func (p *Pool) forgetConnLocked(c *connState) {
	delete(p.conns, c.ID)
	if p.lastConn == c {
		p.lastConn = nil
	}
}

// openLocked marks c open and idle, and counts how long it took to set up.
func (p *Pool) openLocked(c *connState, h *counters, now stamp) {
	c.setState(vocab.StateIdle, now)
	c.openedAt = now
	c.readAtOpen = c.io.read.Load()
	if c.Proto == "h2" {
		c.setH2()
	}
	setup := now.time().Sub(c.DialedAt)
	if p.cfg.onConnOpen != nil {
		p.opened = append(p.opened, c.snapshot())
		p.hasOpened.Store(true)
	}
	h.setups.add(setup)
	h.open++
	h.idle++
	// A connection the Transport is closing no longer counts against its
	// cap, though its Close may not have come yet.
	h.maxOpen = max(h.maxOpen, h.open-h.doomed)
	p.peaks.open++
	p.peaks.maxOpen = max(p.peaks.maxOpen, p.peaks.open-p.peaks.doomed)
}

func (p *Pool) activateLocked(c *connState, id uint64, now stamp) {
	if c.State == vocab.StateClosed || c.State == vocab.StateFailed {
		return
	}
	c.active.add(id)
	if c.State != vocab.StateActive {
		h := c.hc
		if c.State == vocab.StateIdle {
			h.idle--
		}
		h.active++
		c.setState(vocab.StateActive, now)
	}
}

func (p *Pool) deactivateLocked(c *connState, id uint64, now stamp) {
	if c.State != vocab.StateActive {
		return
	}
	c.active.remove(id)
	if c.active.len() > 0 {
		return
	}
	h := c.hc
	h.active--
	h.idle++
	c.setState(vocab.StateIdle, now)
}

func (p *Pool) doomLocked(c *connState) {
	if c.doomed {
		return
	}
	c.doomed = true
	c.hc.doomed++
	p.peaks.doomed++
}

// connReadErr records the first read error of a connection, before it is
// closed: an EOF or reset there means the server closed it.
func (p *Pool) connReadErr(c *connState, err error) {
	p.mu.Lock()
	if p.closingIdle > 0 && c.State == vocab.StateIdle {
		// The client is closing its idle connections: an error now is
		// the server's answer to that (to a TLS close_notify, say).
		p.mu.Unlock()
		return
	}
	if c.readErr == nil {
		c.readErr = err
		c.readErrState = c.State
		c.writesAtReadErr = c.io.writes.Load()
	}
	p.mu.Unlock()
}

// connClosed records the close of a tracked connection and decides who
// closed it and why, then hands a snapshot of it to the OnConnClose hook,
// if any, with the pool's lock released.
func (p *Pool) connClosed(c *connState) {
	now := time.Now()
	p.mu.Lock()
	closed := p.connClosedLocked(c, now)
	var snap Conn
	if closed && p.cfg.onConnClose != nil {
		snap = c.snapshot()
	}
	p.changes.Signal()
	p.mu.Unlock()
	if closed && p.cfg.onConnClose != nil {
		p.cfg.onConnClose(snap)
	}
}

// connClosedLocked applies the close of c at now and reports whether c was
// open or dialing until then; p.mu is held.
func (p *Pool) connClosedLocked(c *connState, now time.Time) bool {
	if c.State == vocab.StateClosed || c.State == vocab.StateFailed {
		return false
	}
	h := c.hc
	prev := c.State
	if prev == vocab.StateHandshake {
		prev = p.handshakeClosedLocked(c, stampOf(now))
	}
	switch prev {
	case vocab.StateIdle:
		h.idle--
		h.open--
		p.peaks.open--
	case vocab.StateActive:
		h.active--
		h.open--
		p.peaks.open--
	}
	if c.doomed {
		h.doomed--
		p.peaks.doomed--
	}
	p.forgetConnLocked(c)
	c.setState(vocab.StateClosed, stampOf(now))
	c.ClosedAt = now
	by, reason := p.closeReasonLocked(c, prev)
	c.ClosedBy, c.CloseReason = by, reason
	h.count(by, reason)
	if reason == vocab.ReasonIdlePoolFull {
		p.churnLocked(c, h, now)
	}
	p.rememberLocked(c)
	return true
}

func (p *Pool) recloseLocked(c *connState, by Closer, reason CloseReason) {
	h := c.hc
	h.uncount(c.ClosedBy, c.CloseReason)
	c.ClosedBy, c.CloseReason = by, reason
	h.count(by, reason)
}

// rememberLocked keeps c among the closed connections the pool remembers,
// in a ring of KeepClosed entries: once it is full, c takes the place of
// the oldest. (Their order does not matter: Conns sorts by id.)
func (p *Pool) rememberLocked(c *connState) {
	if p.cfg.keepClosed == 0 {
		return
	}
	if len(p.closed) < p.cfg.keepClosed {
		p.closed = append(p.closed, c)
		return
	}
	p.closed[p.oldestClosed] = c
	p.oldestClosed = (p.oldestClosed + 1) % len(p.closed)
}
