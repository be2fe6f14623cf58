package serve

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connaudit/connaudit/faultserver"
)

// This file follows the fault listeners' connections: which session and
// scenario each request is of, and the guard that cuts a call nothing of
// the client's ends.

// parsePath splits a fault listener's path /s/{session}/{index}/{what}.
func parsePath(p string) (id string, idx int, what string, ok bool) {
	rest, found := strings.CutPrefix(p, "/s/")
	if !found {
		return "", 0, "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", 0, "", false
	}
	idx, err := strconv.Atoi(parts[1])
	if err != nil || idx < 0 {
		return "", 0, "", false
	}
	return parts[0], idx, parts[2], true
}

// connEvent records an event of a fault listener's connection.
func (s *Server) connEvent(on listener, ev faultserver.ConnEvent) {
	ref := connRef{on: on, id: ev.Conn}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case faultserver.ConnAccepted:
		s.conns[ref] = &connRec{ref: ref, accepted: ev.At}
	case faultserver.ConnRequest:
		c := s.conns[ref]
		id, idx, what, ok := parsePath(ev.Path)
		se := s.sessions[id]
		if c == nil || !ok || se == nil || (c.se != nil && c.se != se) {
			return
		}
		se.mu.Lock()
		defer se.mu.Unlock()
		if se.done || idx >= len(se.states) {
			return
		}
		if c.se == nil {
			if len(se.conns) >= maxConnsPerSession {
				se.extraConn++
				return
			}
			c.se, c.scenario = se, idx
			se.conns = append(se.conns, c)
		}
		se.request(c, se.states[idx], what, ev.At)
	case faultserver.ConnUnread:
		c := s.conns[ref]
		if c == nil || c.se == nil {
			return
		}
		c.se.mu.Lock()
		if c.unread == 0 {
			c.firstUnread = ev.At
		}
		c.unread++
		c.se.changes.Signal()
		c.se.mu.Unlock()
	case faultserver.ConnClosed:
		c := s.conns[ref]
		delete(s.conns, ref)
		if c == nil {
			return
		}
		if se := c.se; se != nil {
			se.mu.Lock()
			defer se.mu.Unlock()
			c.closed, c.closedBy, c.how, c.closedAt = true, ev.ClosedBy, ev.How, ev.At
			se.changes.Signal()
			return
		}
		c.closed, c.closedBy, c.how, c.closedAt = true, ev.ClosedBy, ev.How, ev.At
	}
}

// request records a request of st read on c, a connection of se's; se.mu
// is held.
func (se *session) request(c *connRec, st *scenarioState, what string, at time.Time) {
	c.requests++
	c.last = st.idx
	c.lastReq = at
	if c.firstReq.IsZero() {
		c.firstReq = at
	}
	se.touched = at
	se.wentPast(st.idx)
	if se.reqs >= maxReqsPerSession {
		se.extraReqs++
		return
	}
	se.reqs++
	r := reqRec{conn: c, at: at}
	switch what {
	case "fault":
		st.fault = append(st.fault, r)
		if !st.fromReq && st.report == nil && !st.cut {
			st.fromReq = true
			se.startGuard(st, at)
		}
	case "ok":
		st.ok = append(st.ok, r)
	case "hold":
		st.hold = append(st.hold, r)
		if !st.fromReq && st.report == nil && !st.cut {
			st.fromReq = true
			se.startGuard(st, at)
		}
	}
	se.changes.Signal()
}

// startGuard (re)starts the guard of st from now; se.mu is held.
func (se *session) startGuard(st *scenarioState, from time.Time) {
	if st.guard != nil {
		st.guard.Stop()
	}
	st.guardFrom = from
	st.guard = time.AfterFunc(guardFor(st.sp)-time.Since(from), func() { se.fireGuard(st) })
}

// belowHTTPGuard is the guard of a scenario below HTTP (a full accept
// queue, a stalled handshake) as a kit is told it (guard_ms): no request
// starts it, and its call ends by then whatever order the kit takes the
// scenarios in (silentGuard).
const belowHTTPGuard = 20 * time.Second

// silentGuard is how long a session must be silent — no request of its
// kit's client on any fault listener, no call of its kit's — once the kit
// has reached a scenario below HTTP, or gone past it, before the server
// cuts that scenario: a kit whose client hangs in a connect or a
// handshake makes no other request meanwhile (one that takes its
// scenarios at once goes silent once the others are done). A connect that
// hangs is ended by its SYN's next retransmission after the cut, which the
// closed listener refuses: measured on Linux 6.18 (tcp_syn_linear_timeouts
// 4) the retransmissions come at 1, 2, 3, 4, 11 and 19 s, classically at 1,
// 3, 7, 15 and 31 s; cut at 10 s of silence, the call ends by 15 s either
// way, within belowHTTPGuard.
const silentGuard = 10 * time.Second

// current arms the guard of the first scenario after idx not reported,
// once the kit moves on to it, if that scenario is below HTTP (the guard
// of any other starts with its first request); se.mu is held.
func (se *session) current(after int) {
	for _, st := range se.states[after+1:] {
		if st.report == nil {
			se.armBelowHTTP(st)
			return
		}
	}
}

// wentPast arms the guards of the scenarios below HTTP before idx not
// reported: the kit has gone past them (it takes the scenarios out of
// order, or at once); se.mu is held.
func (se *session) wentPast(idx int) {
	for _, st := range se.states[:idx] {
		if st.report == nil {
			se.armBelowHTTP(st)
		}
	}
}

// armBelowHTTP starts the silence guard of st, a scenario below HTTP, if
// it is not running; se.mu is held.
func (se *session) armBelowHTTP(st *scenarioState) {
	if st.guard != nil || st.sp.on < onTLSStall || st.cut {
		return
	}
	st.guardFrom = time.Now()
	var check func()
	check = func() {
		se.mu.Lock()
		silent := time.Since(se.touched)
		done := st.report != nil || st.cut || se.done
		if !done && silent < silentGuard {
			st.guard = time.AfterFunc(silentGuard-silent, check)
		}
		se.mu.Unlock()
		if !done && silent >= silentGuard {
			se.fireGuard(st)
		}
	}
	st.guard = time.AfterFunc(silentGuard-time.Since(se.touched), check)
}

// fireGuard cuts a scenario whose call outlived its guard: its connections
// are closed, its listener of its own emptied, so the kit's client gets an
// error and the kit goes on.
func (se *session) fireGuard(st *scenarioState) {
	se.mu.Lock()
	if st.report != nil || st.cut || se.done {
		se.mu.Unlock()
		return
	}
	st.cut, st.cutAt = true, time.Now()
	var ids []connRef
	for _, r := range slices.Concat(st.fault, st.hold) {
		if !r.conn.closed && !slices.Contains(ids, r.conn.ref) {
			ids = append(ids, r.conn.ref)
		}
	}
	on := st.sp.on
	stall, hang := se.stall, se.hang
	se.changes.Signal()
	se.mu.Unlock()
	switch on {
	case onTLSStall:
		if stall != nil {
			stall.Close()
		}
	case onConnectHang:
		if hang != nil {
			hang.Close()
		}
	}
	for _, id := range ids {
		se.srv.faults[id.on].CloseConn(id.id)
	}
}
