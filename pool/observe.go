package pool

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
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
	p := o.p
	if !observedKinds.Has(ev.Kind) {
		// No lock for an event that changes nothing.
		return
	}
	var stack []uintptr
	if ev.Kind == vocab.KindResponse && p.stacks {
		stack = slices.Clone(hook.Stack(tl))
	}
	if p.cfg.onConnOpen != nil {
		// After the unlock: a TLS handshake done opens a connection.
		defer p.deliverOpened()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Signal on every path: some cases change a count and then return
	// early (a GotConn for a connection the pool no longer knows still
	// ends the wait).
	defer p.changes.Signal()
	p.observeLocked(tl, ev, stack)
}

// observeLocked applies ev to the pool's state; p.mu is held. It is apart
// from ObserveEvent so that the latter's defers stay open-coded: with two
// defers and a return per case of this switch, the compiler falls back to
// slower deferred calls, which showed in profiles. ObserveEvent passes
// only the kinds of observedKinds: a kind handled here must be listed there.
func (p *Pool) observeLocked(tl *httptrace.Timeline, ev httptrace.Event, stack []uintptr) {
	now := stamp{tl.Start, ev.At} // the event's time
	switch ev.Kind {
	case vocab.KindBodyCollected:
		if r := p.reqLocked(tl.ID); r != nil {
			r.collected = true
		}
	case vocab.KindGetConn:
		// net/http's Transport stops closing the connections that go
		// idle after CloseIdleConnections once a request asks for one.
		p.closeIdle = false
		r := p.reqLocked(tl.ID)
		if r == nil {
			r = p.newRequestLocked(tl)
		}
		if c := r.conn; c != nil {
			p.retriedLocked(r, c)
		}
		if !r.waiting {
			r.waiting = true
			r.getConnAt = ev.At
			p.tally(r.hc, func(n *counters) { n.waiting++ })
		}
		r.conn = nil
	case vocab.KindGotConn:
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
		h := r.hc
		c := p.connLocked(ev.Conn)
		if r.waiting {
			r.waiting = false
			p.tally(h, func(n *counters) { n.waiting-- })
			if waited(tl, r, c) {
				// Every wait counts in the duration; a request that
				// waited again (the Transport retried it) is one more
				// request that waited only the first time.
				d := ev.At - r.getConnAt
				first := !r.waited
				r.waited = true
				p.tally(h, func(n *counters) {
					if first {
						n.waitCount++
					}
					n.waitDuration += d
					n.waits.add(d)
				})
			}
		}
		if c == nil {
			return
		}
		if c.State == vocab.StateHandshake {
			// It serves a request: its handshake succeeded, reported
			// on its request's timeline.
			alpn, known, version := p.leaveTLSLocked(c, true, now)
			p.handshakeDoneLocked(c, alpn, known, version, now)
		}
		again := r.servedBy == c.ID // an attempt of r already came here
		// Whether r is served by a reused connection follows its latest
		// attempt: a hidden retry of a request sent on a reused
		// connection goes to a new one.
		if reused := c.Requests > 0 && !(again && c.Requests == 1); reused != r.reused {
			r.reused = reused
			p.tally(h, func(n *counters) {
				if reused {
					n.reused++
				} else {
					n.reused--
				}
			})
		}
		if !again {
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
		r.conn = c
		p.activateLocked(c, tl.ID, now)
	case vocab.KindTLSDone:
		// A failed handshake's connection is closed already: the
		// Transport closes it before it reports the failure.
		if ev.Err == nil {
			p.tlsDoneLocked(tl.ID, ev.Addr, uint16(ev.N), !ev.Late && tl.TLS.Resumed, now)
		}
	case vocab.KindPutIdleConn:
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
	case vocab.KindResponse:
		r := p.reqLocked(tl.ID)
		if r == nil {
			return
		}
		r.bodyOpen = true
		r.openedAt = now
		r.stack = stack
		r.connClose = tl.ConnClose
		r.proto = tl.Proto
		h := r.hc
		p.tally(h, func(n *counters) { n.openBodies++ })
		if c := r.conn; c != nil {
			if strings.HasPrefix(tl.Proto, "HTTP/2") {
				c.setH2()
			} else if !c.protoSeen {
				// The first response says the version (an HTTP/1.0
				// server's), over what the connection was opened for.
				c.Proto, c.protoSeen = tl.Proto, true
			}
		}
	case vocab.KindDone:
		r := p.reqLocked(tl.ID)
		if r == nil {
			if !ev.Late {
				// The request ended before it asked for a connection
				// (its context ended first, say): it counts all the
				// same.
				u := tl.RawURL()
				_, h := p.requestHostLocked(u.Scheme, requestHost(&u, tl))
				p.tally(h, func(n *counters) { n.requests++ })
			}
			return
		}
		p.requestDoneLocked(tl, r, ev.At)
		if r.conn == nil || r.conn.last != r {
			// Nothing refers to r any more: recycle it.
			*r = request{}
			requestPool.Put(r)
		}
	}
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

// newRequestLocked starts the pool's record of the request of tl.
func (p *Pool) newRequestLocked(tl *httptrace.Timeline) *request {
	r := requestPool.Get().(*request)
	*r = request{id: tl.ID, method: tl.Method, methodIndex: methodIndex(tl.Method), u: tl.RawURL()}
	r.host, r.hc = p.requestHostLocked(r.u.Scheme, requestHost(&r.u, tl))
	r.hc.scheme = r.u.Scheme
	p.reqs.add(r)
	p.tally(r.hc, func(n *counters) {
		n.requests++
		n.inFlight++
		n.inFlightBy[r.methodIndex]++
		n.methodsUsed |= 1 << r.methodIndex
	})
	return r
}

// requestHost returns the host a request to u is sent to: the URL's, which
// the Transport dials, not a Host header set apart from it.
func requestHost(u *url.URL, tl *httptrace.Timeline) string {
	if u.Host != "" {
		return u.Host
	}
	return tl.Host
}

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

// reqLocked returns the pool's record of the request of timeline id, or
// nil once it ended.
func (p *Pool) reqLocked(id uint64) *request {
	return p.reqs.get(id)
}

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

// requestPool recycles the pool's request records, one per request.
var requestPool = sync.Pool{New: func() any { return new(request) }}

// requestDoneLocked records the end of request r, at offset at of its
// timeline.
func (p *Pool) requestDoneLocked(tl *httptrace.Timeline, r *request, at time.Duration) {
	p.bodyClosedLocked(r)
	p.reqs.remove(r)
	h := r.hc
	p.tally(h, func(n *counters) {
		n.inFlight--
		n.inFlightBy[r.methodIndex]--
	})
	if tl.Retries > 0 {
		possibly := int64(p.possiblyProcessedLocked(tl))
		p.tally(h, func(n *counters) {
			n.retries += int64(tl.Retries)
			n.retriesPossibly += possibly
		})
	}
	if r.waiting {
		r.waiting = false
		p.tally(h, func(n *counters) { n.waiting-- })
	}
	r.class = tl.Outcome.Class
	r.early = tl.ClosedEarly
	r.connClose = tl.ConnClose
	r.proto = tl.Proto
	c := r.conn
	if c == nil {
		return
	}
	if c.h2 || strings.HasPrefix(tl.Proto, "HTTP/2") {
		if r.class == vocab.ClassProtocol && h2ConnError(tl.Outcome.Err) {
			// The request ended with the HTTP/2 connection error for which
			// the client closes the connection: the client's close, not
			// the server's GOAWAY, whether it came before or after.
			c.protoErr = true
			if c.State == vocab.StateClosed && c.readErr == nil {
				switch c.CloseReason {
				case vocab.ReasonServerGoAway, vocab.ReasonClient, vocab.ReasonRequestError:
					p.recloseLocked(c, vocab.ClosedByClient, vocab.ReasonProtocolError)
					c.CloseDetail = ""
				}
			}
		}
		p.deactivateLocked(c, tl.ID, stamp{tl.Start, at})
		if eof := bodyEOF(tl); c.State == vocab.StateIdle && eof >= 0 && eof < at {
			// net/http's idle timer for an HTTP/2 connection starts
			// when its last stream ends, at the body's EOF, not when
			// the body is closed.
			c.idleSince = stamp{tl.Start, eof}
		}
		return
	}
	if c.State == vocab.StateClosed {
		if c.closeReq == tl.ID && c.CloseReason == vocab.ReasonRequestError {
			// Refine the reason now that the request's outcome is known.
			by, reason := requestCloseReason(r, p.tr.DisableKeepAlives)
			p.recloseLocked(c, by, reason)
			if reason == vocab.ReasonRequestError {
				c.CloseDetail = string(r.class)
			}
		}
		return
	}
	if c.active.has(tl.ID) && c.State == vocab.StateActive {
		// The request ended while its HTTP/1 connection is still
		// active: the Transport is about to close it, and has
		// already stopped counting it against MaxConnsPerHost.
		c.last = r
		p.doomLocked(c)
	}
}

// possiblyProcessedLocked returns how many of the attempts of tl, a
// request the Transport sent again, the server may have processed (see
// Stats.HiddenRetriesPossiblyProcessed): each attempt but the last is
// judged on what the pool saw of its connection, or, if the pool no
// longer knows it, on whether the timeline saw its headers written; an
// attempt whose events the timeline lost (it was full) may have been.
func (p *Pool) possiblyProcessedLocked(tl *httptrace.Timeline) int {
	var (
		possibly, judged int
		conn             uint64
		got, wrote       bool // an attempt is open (a GotConn not yet followed by a GetConn); it wrote its headers
	)
	for i := range tl.Events {
		e := &tl.Events[i]
		if e.Late {
			continue
		}
		switch e.Kind {
		case vocab.KindGotConn:
			got, conn, wrote = true, e.Conn, false
		case vocab.KindWroteHeaders:
			wrote = true
		case vocab.KindGetConn:
			if !got {
				continue
			}
			got = false
			judged++
			c := p.knownLocked(conn)
			if c == nil {
				// Forgotten (KeepClosed): the timeline alone says
				// whether the request was written.
				if wrote {
					possibly++
				}
				continue
			}
			// Over HTTP/2 attempt says nothing written: see
			// Stats.HiddenRetriesPossiblyProcessed.
			if a := c.attempt(); a.Wrote && !a.ClosedFirst {
				possibly++
			}
		}
	}
	return possibly + max(tl.Retries-judged, 0)
}

// bodyEOF returns the offset of tl's body EOF, or -1.
func bodyEOF(tl *httptrace.Timeline) time.Duration {
	for i := len(tl.Events) - 1; i >= 0; i-- {
		if e := &tl.Events[i]; e.Kind == vocab.KindBodyEOF && !e.Late {
			return e.At
		}
	}
	return -1
}

// requestCloseReason says why the Transport closes an HTTP/1 connection
// after request r ended on it.
func requestCloseReason(r *request, keepAlivesOff bool) (Closer, CloseReason) {
	switch {
	case r.connClose && !keepAlivesOff:
		// With keep-alives off the client asked for the close itself
		// ("Connection: close" on the request), and the server only
		// echoed it.
		return vocab.ClosedByServer, connCloseReason(r.proto)
	case r.early && r.class == vocab.ClassOK:
		return vocab.ClosedByClient, vocab.ReasonEarlyBodyClose
	case keepAlivesOff && r.class == vocab.ClassOK:
		return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff
	case r.class == vocab.ClassProtocol:
		return vocab.ClosedByClient, vocab.ReasonProtocolError
	case r.class == vocab.ClassOK:
		// The request succeeded, yet the Transport gave the connection
		// up: it does so when the write goroutine has not reported the
		// request written 50ms after the response was read (net/http's
		// maxWriteWaitBeforeConnReuse), which happens under load.
		return vocab.ClosedByClient, vocab.ReasonClient
	}
	return vocab.ClosedByClient, vocab.ReasonRequestError
}

func (p *Pool) doomLocked(c *connState) {
	if c.doomed {
		return
	}
	c.doomed = true
	p.tally(c.hc, func(n *counters) { n.doomed++ })
}

func connCloseReason(proto string) CloseReason {
	if proto == "HTTP/1.0" {
		return vocab.ReasonHTTP10
	}
	return vocab.ReasonConnectionClose
}

func (p *Pool) bodyClosedLocked(r *request) {
	if !r.bodyOpen {
		return
	}
	r.bodyOpen = false
	h := r.hc
	p.tally(h, func(n *counters) { n.openBodies-- })
}

// handshakeDoneLocked opens a connection whose TLS handshake finished,
// taken out of its request's handshakes (see tlsWait), which negotiated
// protocol alpn if known.
func (p *Pool) handshakeDoneLocked(c *connState, alpn string, known bool, version uint16, now stamp) {
	h := c.hc
	p.tally(h, func(n *counters) { n.dialing-- })
	c.dialCtx = nil
	if alpn == "h2" {
		c.setH2()
	} else if known && c.Proto == "" {
		// net/http speaks HTTP/1.1 over TLS unless h2 was negotiated.
		c.Proto = "HTTP/1.1"
	}
	if version != 0 {
		c.TLSVersion = tls.VersionName(version)
	}
	p.openLocked(c, h, now)
}

func (p *Pool) activateLocked(c *connState, id uint64, now stamp) {
	if c.State == vocab.StateClosed || c.State == vocab.StateFailed {
		return
	}
	c.active.add(id)
	if c.State != vocab.StateActive {
		h := c.hc
		if c.State == vocab.StateIdle {
			p.tally(h, func(n *counters) { n.idle-- })
		}
		p.tally(h, func(n *counters) { n.active++ })
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
	p.tally(h, func(n *counters) {
		n.active--
		n.idle++
	})
	c.setState(vocab.StateIdle, now)
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
		p.tally(h, func(n *counters) {
			n.idle--
			n.open--
		})
	case vocab.StateActive:
		p.tally(h, func(n *counters) {
			n.active--
			n.open--
		})
	}
	if c.doomed {
		p.tally(h, func(n *counters) { n.doomed-- })
	}
	p.forgetConnLocked(c)
	c.setState(vocab.StateClosed, stampOf(now))
	c.ClosedAt = now
	by, reason := p.closeReasonLocked(c, prev)
	c.ClosedBy, c.CloseReason = by, reason
	p.tally(h, func(n *counters) { n.count(by, reason) })
	p.rememberLocked(c)
	return true
}

func (p *Pool) recloseLocked(c *connState, by Closer, reason CloseReason) {
	h := c.hc
	p.tally(h, func(n *counters) { n.uncount(c.ClosedBy, c.CloseReason) })
	c.ClosedBy, c.CloseReason = by, reason
	p.tally(h, func(n *counters) { n.count(by, reason) })
}

// activeReqsLocked returns the requests c serves, finished or not.
func (p *Pool) activeReqsLocked(c *connState) []*request {
	var out []*request
	for id := range c.active.all() {
		if r := p.reqs.get(id); r != nil {
			out = append(out, r)
		} else if c.last != nil && c.last.id == id {
			out = append(out, c.last)
		}
	}
	return out
}

func (p *Pool) closeReasonLocked(c *connState, prev ConnState) (Closer, CloseReason) {
	reqs := p.activeReqsLocked(c)
	// A response that asked for the close explains it whatever came first
	// (unless the client asked first: keep-alives off).
	for _, r := range reqs {
		if r.connClose && !p.tr.DisableKeepAlives {
			return vocab.ClosedByServer, connCloseReason(r.proto)
		}
	}
	// The client gave the connection up over what the server sent (an
	// HTTP/2 connection error, a malformed response).
	if c.readErr == nil && (c.protoErr || slices.ContainsFunc(reqs, func(r *request) bool { return r.class == vocab.ClassProtocol })) {
		return vocab.ClosedByClient, vocab.ReasonProtocolError
	}
	if reason, ok := serverSide(c.readErr); ok {
		// Idle or not when the server closed, not when the client
		// got round to closing: an HTTP/2 stream that the close killed
		// ends before the connection does.
		if c.readErrState == vocab.StateIdle && reason == vocab.ReasonServerEOF {
			return vocab.ClosedByServer, vocab.ReasonServerClosedIdle
		}
		return vocab.ClosedByServer, reason
	}
	if alert, idle := c.lastAlert(); alert && c.readErr == nil && !c.h2 && c.tls && prev != vocab.StateHandshake {
		// Over TLS the server's close begins with its close_notify, on
		// which crypto/tls reports EOF to net/http and reads no further:
		// the FIN that would have been the pool's read error stays
		// unread. The last record read was an alert.
		switch {
		case idle && prev == vocab.StateIdle:
			c.CloseDetail = "its TLS alert (close_notify) read while the connection was idle"
			return vocab.ClosedByServer, vocab.ReasonServerClosedIdle
		case !idle && prev == vocab.StateActive:
			c.CloseDetail = "its TLS alert (close_notify) read during a request"
			return vocab.ClosedByServer, vocab.ReasonServerEOF
		}
	}
	if c.readErr != nil && prev == vocab.StateActive {
		// Any other read failure: the client gives the connection up.
		c.CloseDetail = c.readErr.Error()
	}
	if c.h2 && prev != vocab.StateHandshake && p.closingIdle == 0 && c.putIdleErr == nil {
		t := p.tr.IdleConnTimeout
		if d, ok := c.io.sinceRead(time.Since(ioEpoch), t/8); ok && timedOut(d, t) {
			// Nothing came in for the idle timeout: net/http's idle timer
			// closed it. That timer starts when the last stream ends
			// (its END_STREAM read), not when its body is closed, so a
			// connection whose body the caller still holds, and which the
			// pool counts active, times out too.
			return vocab.ClosedByClient, vocab.ReasonIdleTimeout
		}
		if prev == vocab.StateIdle && c.Requests == 0 && !timedOut(time.Since(c.idleSince.time()), t) {
			// A connection no request ever used: the Transport dialed
			// more than one at once and keeps one per host for HTTP/2,
			// closing the others as their handshakes end.
			c.CloseDetail = "never used: HTTP/2 takes one connection per host"
			return vocab.ClosedByClient, vocab.ReasonH2Unused
		}
		// An HTTP/2 client closes a connection itself once the server
		// sent GOAWAY and its last stream ended. The frame is not visible
		// here (the bytes are encrypted); infer it: the connection was not
		// idle long enough to time out, and no request on it failed.
		goaway := true
		for _, r := range reqs {
			if r.class != "" && r.class != vocab.ClassOK {
				goaway = false
			}
		}
		if prev == vocab.StateIdle && timedOut(time.Since(c.idleSince.time()), p.tr.IdleConnTimeout) {
			goaway = false
		}
		if goaway {
			return vocab.ClosedByServer, vocab.ReasonServerGoAway
		}
	}
	switch prev {
	case vocab.StateHandshake:
		if c.Abandoned {
			return vocab.ClosedByClient, vocab.ReasonHandshakeAbandon
		}
		return vocab.ClosedByClient, vocab.ReasonHandshakeFailed
	case vocab.StateIdle:
		switch {
		case p.closingIdle > 0:
			return vocab.ClosedByClient, vocab.ReasonCloseIdle
		case c.putIdleErr != nil:
			return vocab.ClosedByClient, putIdleReason(c.putIdleErr)
		case p.tr.DisableKeepAlives || p.tr.MaxIdleConnsPerHost < 0:
			return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff
		case timedOut(time.Since(c.idleSince.time()), p.tr.IdleConnTimeout):
			return vocab.ClosedByClient, vocab.ReasonIdleTimeout
		case p.tr.MaxIdleConns > 0 && p.idleOverLocked():
			// net/http closes the least recently used idle connection,
			// with no hook, to keep MaxIdleConns.
			return vocab.ClosedByClient, vocab.ReasonIdlePoolFull
		case !c.h2 && c.readErr == nil && c.Requests == 0 && (c.tls || c.io.read.Load() == c.readAtOpen):
			// A connection no request used, closed with no hook and
			// nothing read from the server since it opened (over TLS,
			// nothing the pool can tell apart from the session tickets
			// that follow the handshake): its dial ended after the
			// request it was made for got another connection, and
			// net/http offered it to the idle pool, which refused it
			// (putOrCloseIdleConn): the host's idle connections were at
			// MaxIdleConnsPerHost, or, after CloseIdleConnections, the
			// Transport keeps none.
			if p.closeIdle {
				c.CloseDetail = "never used: its dial ended after CloseIdleConnections, when the Transport keeps no idle connection"
				return vocab.ClosedByClient, vocab.ReasonCloseIdle
			}
			c.CloseDetail = fmt.Sprintf("never used: the request it was dialed for took another connection, and the idle pool had no room (MaxIdleConnsPerHost %d)",
				p.maxIdlePerHost())
			return vocab.ClosedByClient, vocab.ReasonIdlePoolFull
		case !c.h2 && c.readErr == nil:
			// net/http's HTTP/1 read loop gives an idle connection up, with
			// no hook, when bytes arrive while no response is due
			// ("Unsolicited response received on idle HTTP channel"):
			// bytes after a response's end, or a body to a HEAD request.
			c.CloseDetail = "the server sent bytes when no response was due (after a response's end, or a body to HEAD)"
			return vocab.ClosedByClient, vocab.ReasonProtocolError
		}
		return vocab.ClosedByClient, vocab.ReasonClient
	}
	for _, r := range reqs {
		if r.early && (r.class == "" || r.class == vocab.ClassOK) {
			return vocab.ClosedByClient, vocab.ReasonEarlyBodyClose
		}
	}
	if c.putIdleErr != nil {
		return vocab.ClosedByClient, putIdleReason(c.putIdleErr)
	}
	if p.tr.DisableKeepAlives {
		return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff
	}
	for _, r := range reqs {
		if !c.h2 && r.class == "" && r.conn != c && c.readErr == nil {
			// The Transport already sends the request again (see
			// retriedLocked).
			c.CloseDetail = serverClosedBeforeResponse
			return vocab.ClosedByServer, vocab.ReasonServerEOF
		}
	}
	for _, r := range reqs {
		c.closeReq = r.id
		if r.class != "" {
			// The request already ended: its outcome is the detail.
			by, reason := requestCloseReason(r, p.tr.DisableKeepAlives)
			if reason == vocab.ReasonRequestError {
				c.CloseDetail = string(r.class)
			}
			return by, reason
		}
	}
	if prev == vocab.StateActive {
		return vocab.ClosedByClient, vocab.ReasonRequestError
	}
	return vocab.ClosedByClient, vocab.ReasonClient
}

// timedOut reports whether a connection idle for d can have been closed by
// net/http's idle timer, of timeout t. The pool learns that a connection
// went idle a little after the Transport started the timer (the hook runs
// after), hence the slack.
func timedOut(d, t time.Duration) bool {
	return t > 0 && d >= t-t/8
}

// putIdleReason names the PutIdleConn error that made the Transport close
// a connection instead of keeping it idle. net/http's errors here are
// unexported; their texts are stable.
func putIdleReason(err error) CloseReason {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "too many idle"):
		return vocab.ReasonIdlePoolFull
	case strings.Contains(msg, "keep alives disabled") || strings.Contains(msg, "keep-alives"):
		return vocab.ReasonKeepAlivesOff
	case errors.Is(err, errIdleClosed), strings.Contains(msg, "CloseIdleConnections"):
		return vocab.ReasonCloseIdle
	}
	return vocab.ReasonClient
}

var errIdleClosed = errors.New("http: CloseIdleConnections called")

// maxIdlePerHost returns the Transport's effective MaxIdleConnsPerHost.
func (p *Pool) maxIdlePerHost() int {
	if n := p.tr.MaxIdleConnsPerHost; n != 0 {
		return n
	}
	return http.DefaultMaxIdleConnsPerHost
}

// idleOverLocked reports whether the idle connections (the one being
// closed, no longer counted, included) reach http.Transport.MaxIdleConns,
// so that net/http may have closed the least recently used of them.
func (p *Pool) idleOverLocked() bool {
	return p.total.idle+1 >= p.tr.MaxIdleConns
}

// h2ConnError reports whether err is an HTTP/2 connection error of the
// bundled http2 (its ConnectionError, unexported: "connection error:
// FLOW_CONTROL_ERROR"), for which the client closes the connection.
func h2ConnError(err error) bool {
	// http.Client's *url.Error quotes the URL, whose text is not the
	// error's.
	for {
		ue, ok := err.(*url.Error)
		if !ok || ue.Err == nil {
			break
		}
		err = ue.Err
	}
	return err != nil && strings.Contains(err.Error(), "connection error: ")
}
