package pool

import (
	"net/url"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/attempts"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// request is the pool's record of a request not yet finished.
type request struct {
	id     uint64
	method string
	// methodIndex is the index of method in methods.
	methodIndex uint8
	host        string
	hc          *counters // the counters of host
	conn        *connState
	getConnAt   time.Duration // the offset of the last GetConn in its timeline
	waiting     bool
	bodyOpen    bool
	openedAt    stamp
	stack       []uintptr // where it was made, with CaptureStacks
	collected   bool
	waited      bool   // it waited for a connection (counted in waitCount)
	reused      bool   // its latest attempt got a reused connection (counted in reused)
	servedBy    uint64 // the connection its latest attempt was counted on
	early       bool
	connClose   bool
	proto       string
	// u is the request's URL as the caller gave it, unredacted: redact
	// before any output. It is the caller's until the request ends (the
	// caller may not change it until then), a copy in a record kept
	// longer (see keep).
	u     *url.URL
	class httptrace.Class
	live  bool // in the pool's requests: not yet ended
}

// newRequest returns a record of the request of tl, not yet the pool's:
// what it takes from the timeline alone, filled before the pool's lock is
// taken, which every event of every request takes in turn. The record is
// the one tl's slot holds (hook.Slot), made for a slot that holds none: a
// recorder the tracer recycles keeps its record from request to request.
// It returns nil when that record is the pool's already for this request
// (the Transport asks for a connection again). The slot is the pool's
// alone, and read and written with the recorder's lock held, as every
// event the pool observes is.
func newRequest(tl *httptrace.Timeline) *request {
	slot := hook.Slot(tl)
	r, _ := (*slot).(*request)
	switch {
	case r == nil:
		r = new(request)
		*slot = r
	case r.live:
		if r.id == tl.ID {
			return nil
		}
		// Not this request's, yet still the pool's: never so, since a
		// recorder is recycled once its request ended; a record of its
		// own, to be safe.
		r = new(request)
		*slot = r
	}
	u := hook.URL(tl)
	if u == nil {
		u = new(url.URL)
	}
	*r = request{id: tl.ID, method: tl.Method, methodIndex: methodIndex(tl.Method), u: u}
	return r
}

// keep takes r, the record of the request of tl, out of tl's slot, with a
// copy of its URL, which the caller may change once the request ended: the
// pool keeps it past the request's end.
func keep(tl *httptrace.Timeline, r *request) {
	if slot := hook.Slot(tl); *slot == r {
		*slot = nil
	}
	u := *r.u
	r.u = &u
}

// newRequestLocked starts the pool's record of the request of tl.
func (p *Pool) newRequestLocked(tl *httptrace.Timeline) *request {
	return p.addRequestLocked(tl, newRequest(tl))
}

// addRequestLocked starts the pool's record r of the request of tl.
func (p *Pool) addRequestLocked(tl *httptrace.Timeline, r *request) *request {
	r.host, r.hc = p.requestHostLocked(r.u.Scheme, requestHost(r.u, tl))
	r.hc.scheme = r.u.Scheme
	r.live = true
	p.reqs.add(r)
	h := r.hc
	h.requests++
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	h.inFlightBy[r.methodIndex]++
	h.methodsUsed |= 1 << r.methodIndex
	p.peaks.inFlight++
	p.peaks.maxInFlight = max(p.peaks.maxInFlight, p.peaks.inFlight)
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

// reqLocked returns the pool's record of the request of timeline id, or
// nil once it ended.
func (p *Pool) reqLocked(id uint64) *request {
	return p.reqs.get(id)
}

// requestDoneLocked records the end of request r, at offset at of its
// timeline.
func (p *Pool) requestDoneLocked(tl *httptrace.Timeline, r *request, at time.Duration) {
	p.bodyClosedLocked(r)
	p.reqs.remove(r)
	r.live = false
	h := r.hc
	h.inFlight--
	h.inFlightBy[r.methodIndex]--
	p.peaks.inFlight--
	if tl.Retries > 0 {
		h.retries += int64(tl.Retries)
		h.retriesPossibly += int64(p.possiblyProcessedLocked(tl))
	}
	if r.waiting {
		r.waiting = false
		h.waiting--
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
			by, reason := p.requestCloseReason(r, c)
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
		keep(tl, r)
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
	possibly, judged := 0, 0
	for conn, wrote := range attempts.Abandoned(tl) {
		judged++
		c := p.knownLocked(conn)
		if c == nil {
			// Forgotten (KeepClosed): the timeline alone says whether
			// the request was written.
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

func (p *Pool) bodyClosedLocked(r *request) {
	if !r.bodyOpen {
		return
	}
	r.bodyOpen = false
	h := r.hc
	h.openBodies--
}
