package pool

import (
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// observer is the pool as an [httptrace.EventObserver] of its own tracer:
// apart from Pool, so that the pool's method set is the user's API alone.
type observer struct{ p *Pool }

// Observe implements [httptrace.Observer]; the pool learns of finished
// requests through ObserveEvent's done event, so Observe does nothing.
func (observer) Observe(*httptrace.Timeline) {}

// observedKinds are the kinds of events that change the pool's state. The
// others (writes, first byte, body EOF, DNS and connect, which the dialer
// sees itself) change nothing. Nor does the body's close: the done event
// that follows it in the same call closes the pool's record.
var observedKinds = vocab.Of(vocab.KindGetConn, vocab.KindGotConn, vocab.KindTLSDone,
	vocab.KindPutIdleConn, vocab.KindResponse, vocab.KindDone, vocab.KindBodyCollected)

// EventKinds implements hook.Filter: the tracer calls ObserveEvent for the
// kinds of events that change the pool's state alone.
func (observer) EventKinds() vocab.KindSet { return observedKinds }

// ObserveEvent implements [httptrace.EventObserver]: the pool follows each
// request's events to keep connection states and statistics.
func (o observer) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	o.ObserveKind(tl, &ev, vocab.Bit(ev.Kind))
}

// ObserveKind implements hook.KindObserver: ObserveEvent for an event of
// the kind whose bit is bit, which the tracer passes. It applies the event
// to the pool's state under the pool's lock; a kind handled here must be
// listed in observedKinds.
//
// It runs five times a request on the Transport's goroutines, between
// stretches of net/http's own code, fetched anew each time: no defer (each
// deferred call, and the exit paths the compiler copies for it, is more
// code), no second function to dispatch in, what is rare out of line.
// Nothing between Lock and Unlock calls out of the pool.
func (o observer) ObserveKind(tl *httptrace.Timeline, ev *httptrace.Event, bit vocab.KindSet) {
	p := o.p
	if observedKinds&bit == 0 {
		// No lock for an event that changes nothing.
		return
	}
	// What a request's record takes from the timeline is filled, and its
	// stack copied, before the lock: the lock is held for the pool's
	// state alone.
	var stack []uintptr
	if bit == vocab.BitResponse && p.stacks {
		stack = requestStack(tl)
	}
	var fresh *request
	if bit == vocab.BitGetConn {
		fresh = newRequest(tl)
	}
	churn := p.churnPending.Load()
	p.mu.Lock()
	switch bit {
	case vocab.BitGetConn:
		p.getConnLocked(tl, ev, fresh)
	case vocab.BitGotConn:
		p.gotConnLocked(tl, ev, stamp{tl.Start, ev.At})
	case vocab.BitPutIdleConn:
		p.putIdleConnLocked(tl, ev, stamp{tl.Start, ev.At})
	case vocab.BitResponse:
		p.responseLocked(tl, stamp{tl.Start, ev.At}, stack)
	case vocab.BitDone:
		p.doneLocked(tl, ev)
	case vocab.BitTLSDone:
		// A failed handshake's connection is closed already: the
		// Transport closes it before it reports the failure.
		if ev.Err == nil {
			p.tlsDoneLocked(tl.ID, ev.Addr, uint16(ev.N), !ev.Late && tl.TLS.Resumed, stamp{tl.Start, ev.At})
		}
	case vocab.BitBodyCollected:
		if r := p.reqLocked(tl.ID); r != nil {
			r.collected = true
		}
	}
	// Signal on every path: some cases change a count and then return
	// early (a GotConn for a connection the pool no longer knows still
	// ends the wait).
	p.changes.Signal()
	p.mu.Unlock()
	if churn {
		p.warnChurn(tl, ev.At)
	}
	if p.cfg.onConnOpen != nil {
		// A TLS handshake done opens a connection.
		p.deliverOpened()
	}
}

// requestStack returns a copy of where the request of tl was made
// (CaptureStacks).
//
//go:noinline
func requestStack(tl *httptrace.Timeline) []uintptr {
	return slices.Clone(hook.Stack(tl))
}

// getConnLocked records that the request of tl asks for a connection: a
// new request, whose record fresh becomes, or one the Transport sends
// again.
func (p *Pool) getConnLocked(tl *httptrace.Timeline, ev *httptrace.Event, fresh *request) {
	// net/http's Transport stops closing the connections that go
	// idle after CloseIdleConnections once a request asks for one.
	p.closeIdle = false
	r := p.reqLocked(tl.ID)
	if r == nil {
		// fresh is nil only when the request's record is the pool's
		// already, which r would be.
		r = p.addRequestLocked(tl, fresh)
	}
	if c := r.conn; c != nil {
		p.retriedLocked(r, c)
	}
	if !r.waiting {
		r.waiting = true
		r.getConnAt = ev.At
		r.hc.waiting++
	}
	r.conn = nil
}

// gotConnLocked records that the request of tl was handed the connection
// ev names: its wait ends, and the connection serves it.
func (p *Pool) gotConnLocked(tl *httptrace.Timeline, ev *httptrace.Event, now stamp) {
	r := p.reqLocked(tl.ID)
	if r == nil {
		if ev.Late {
			return
		}
		// net/http's HTTP/2 connection pool skips GetConn for the
		// first request to take a connection the Transport dialed
		// for another request (it marks the connection, not the
		// request, as announced): such a request starts here.
		r = p.newRequestLocked(tl)
	}
	c := p.connLocked(ev.Conn)
	p.endWaitLocked(tl, r, c, ev.At)
	if c == nil {
		return
	}
	if c.State == vocab.StateHandshake {
		// It serves a request: its handshake succeeded, reported
		// on its request's timeline.
		alpn, known, version := p.leaveTLSLocked(c, true, now)
		p.handshakeDoneLocked(c, alpn, known, version, now)
	}
	p.servedByLocked(tl, r, c, now)
	r.conn = c
	p.activateLocked(c, tl.ID, now)
}

// endWaitLocked ends the wait of request r, if it was waiting, for the
// connection c (nil if the pool no longer knows it) handed to it at offset
// at of its timeline tl, and counts the wait if it waited.
func (p *Pool) endWaitLocked(tl *httptrace.Timeline, r *request, c *connState, at time.Duration) {
	if !r.waiting {
		return
	}
	h := r.hc
	r.waiting = false
	h.waiting--
	if !waited(tl, r, c) {
		return
	}
	// Every wait counts in the duration; a request that waited again
	// (the Transport retried it) is one more request that waited only
	// the first time.
	d := at - r.getConnAt
	first := !r.waited
	r.waited = true
	if first {
		h.waitCount++
	}
	h.waitDuration += d
	h.waits.add(d)
}

// servedByLocked counts request r, of timeline tl, on connection c, which
// was handed to it: a reused connection or not, and one more request of
// c's unless an attempt of r already came to c.
func (p *Pool) servedByLocked(tl *httptrace.Timeline, r *request, c *connState, now stamp) {
	again := r.servedBy == c.ID // an attempt of r already came here
	// Whether r is served by a reused connection follows its latest
	// attempt: a hidden retry of a request sent on a reused connection
	// goes to a new one.
	if reused := c.Requests > 0 && !(again && c.Requests == 1); reused != r.reused {
		r.reused = reused
		if reused {
			r.hc.reused++
		} else {
			r.hc.reused--
		}
	}
	if again {
		return
	}
	r.servedBy = c.ID
	if !c.h2 {
		c.writesAtGot, c.writtenAtGot = c.io.writes.Load(), c.io.written.Load()
		c.gotIdle, c.idleAtGot, c.gotAt = c.State == vocab.StateIdle, c.idleSince, now
	}
	c.Requests++
	if len(c.RequestIDs) < maxRequestIDs {
		c.RequestIDs = append(c.RequestIDs, tl.ID)
	}
}

// putIdleConnLocked records the Transport's returning the connection ev
// names to the idle pool, or, with ev's error, its refusal to keep it,
// which dooms it.
func (p *Pool) putIdleConnLocked(tl *httptrace.Timeline, ev *httptrace.Event, now stamp) {
	c := p.connLocked(ev.Conn)
	if c == nil {
		return
	}
	if ev.Err != nil {
		c.putIdleErr = ev.Err
		p.doomLocked(c)
		return
	}
	p.deactivateLocked(c, tl.ID, now)
}

// responseLocked records the response of the request of tl: its body is
// open from now, made at stack, and the response says the connection's
// protocol.
func (p *Pool) responseLocked(tl *httptrace.Timeline, now stamp, stack []uintptr) {
	r := p.reqLocked(tl.ID)
	if r == nil {
		return
	}
	r.bodyOpen = true
	r.openedAt = now
	r.stack = stack
	r.connClose = tl.ConnClose
	r.proto = tl.Proto
	r.hc.openBodies++
	if c := r.conn; c != nil {
		if strings.HasPrefix(tl.Proto, "HTTP/2") {
			c.setH2()
		} else if !c.protoSeen {
			// The first response says the version (an HTTP/1.0
			// server's), over what the connection was opened for.
			c.Proto, c.protoSeen = tl.Proto, true
		}
	}
}

// doneLocked records the end of the request of tl.
func (p *Pool) doneLocked(tl *httptrace.Timeline, ev *httptrace.Event) {
	r := p.reqLocked(tl.ID)
	if r == nil {
		if !ev.Late {
			// The request ended before it asked for a connection
			// (its context ended first, say): it counts all the
			// same.
			u := tl.RawURL()
			_, h := p.requestHostLocked(u.Scheme, requestHost(&u, tl))
			h.requests++
		}
		return
	}
	p.requestDoneLocked(tl, r, ev.At)
}

// retriedLocked refines the close of c, the HTTP/1 connection request r
// was sent on, now that the Transport sends r again: it does so only when
// the connection failed before r's response began (the server closed a
// kept-alive connection, or nothing of r could be written), which the
// pool cannot see through TLS when the server's close_notify came before
// its FIN: the close the pool saw as the client's, over a request error,
// was the server's.
func (p *Pool) retriedLocked(r *request, c *connState) {
	if c.h2 || c.State != vocab.StateClosed || c.closeReq != r.id || c.CloseReason != vocab.ReasonRequestError || c.readErr != nil {
		return
	}
	p.recloseLocked(c, vocab.ClosedByServer, vocab.ReasonServerEOF)
	c.CloseDetail = serverClosedBeforeResponse
}

// serverClosedBeforeResponse details a close the pool learnt was the
// server's from the Transport sending the request again.
const serverClosedBeforeResponse = "closed before the response began: the Transport sent the request again"

// waited reports whether request r waited for the connection c a GotConn
// handed it, when it was waiting for one: an HTTP/1 request did unless it
// took an idle connection; an HTTP/2 request did if the connection opened
// after the request asked for one (a request that joins an open HTTP/2
// connection beside other streams did not wait, though the connection was
// not idle).
func waited(tl *httptrace.Timeline, r *request, c *connState) bool {
	if c == nil || !c.h2 || c.openedAt.start.IsZero() {
		return !tl.Conn.WasIdle
	}
	return c.openedAt.time().After(tl.Start.Add(r.getConnAt))
}
