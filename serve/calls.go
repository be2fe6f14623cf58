package serve

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// This file is what the control API's calls do to a session. A session's
// state is guarded by its own mutex (se.mu); the server's (s.mu) guards
// only which sessions and connections exist. One is taken before the
// other, never the reverse: s.mu, then se.mu.

// maxEnteredWait bounds a long poll of entered_url.
const maxEnteredWait = 10 * time.Second

// clientCloseWait bounds how long close_url waits for the client to close
// its side of a connection the server closed with a FIN.
const clientCloseWait = time.Second

// Closed answers POST …/close: how the server closed the scenario's
// kept-alive connection ("fin", "rst", "idle", "limit"), and whether the
// client had closed its side by then (after a FIN the server waits for it,
// at most a second; after an RST it cannot see it); and POST …/settle,
// Closed empty: whether the client had closed the connection the fault
// made unusable.
type Closed struct {
	Protocol     string `json:"protocol"`
	Closed       string `json:"closed"`
	ClientClosed bool   `json:"client_closed"`
}

// scenarios answers GET …/scenarios; the first call starts the guard of a
// first scenario below HTTP.
func (se *session) scenarios() Scenarios {
	se.mu.Lock()
	defer se.mu.Unlock()
	out := Scenarios{Protocol: Protocol, Session: se.id}
	for _, st := range se.states {
		out.Scenarios = append(out.Scenarios, st.spec)
	}
	if !se.fetched {
		se.fetched = true
		se.current(-1)
	}
	return out
}

// scenarioAt returns the scenario whose index q names, or a 404.
func (se *session) scenarioAt(q string) (*scenarioState, error) {
	idx, err := strconv.Atoi(q)
	se.mu.Lock()
	defer se.mu.Unlock()
	if err != nil || idx < 0 || idx >= len(se.states) {
		return nil, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no scenario %q in session %s", printable(q), se.id)}
	}
	return se.states[idx], nil
}

// entered waits, at most wait, until the handler of st's fault (or of its
// hold) was entered, and returns how many times it was.
func (s *Server) entered(ctx context.Context, st *scenarioState, hold bool, wait time.Duration) (int64, error) {
	path, on := st.faultPath, st.sp.on
	if hold {
		path, on = st.holdPath, onPlain
	}
	if on > onRawH2 {
		return 0, badRequest("scenario %s has no handler to enter", st.sp.Name)
	}
	fs := s.faults[on]
	t := time.NewTimer(wait)
	defer t.Stop()
	entered := fs.Entered(path)
	for fs.Counters(path).HandlersEntered == 0 {
		select {
		case <-entered:
		case <-t.C:
			return 0, &apiErr{code: http.StatusRequestTimeout,
				msg: fmt.Sprintf("the handler of %s was not entered within %v", st.sp.Name, wait)}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.ctx.Done():
			return 0, &apiErr{code: http.StatusServiceUnavailable, msg: "the server is stopping"}
		}
	}
	return fs.Counters(path).HandlersEntered, nil
}

// closeWarm closes, as the scenario says (a FIN, an RST, or its own idle
// timeout's FIN), the kept-alive connection its warm-up came on, once; a
// second call answers as the first did.
func (s *Server) closeWarm(ctx context.Context, se *session, st *scenarioState) (Closed, error) {
	se.mu.Lock()
	how := st.sp.Close
	switch {
	case how == "":
		se.mu.Unlock()
		return Closed{}, badRequest("scenario %s has no connection for the server to close", st.sp.Name)
	case st.closed == nil && len(st.fault) == 0:
		se.mu.Unlock()
		return Closed{}, &apiErr{code: http.StatusConflict,
			msg: fmt.Sprintf("scenario %s: the warm-up request was not seen, so no kept-alive connection is there to close", st.sp.Name)}
	}
	first := st.closed == nil
	if first {
		st.closed = st.fault[0].conn
	}
	c := st.closed
	se.mu.Unlock()
	if first {
		fs := s.faults[st.sp.on]
		isClosed := func() bool { return c.closed }
		switch how {
		case "rst":
			fs.ResetConn(c.ref.id)
		case "fin":
			fs.CloseWriteConn(c.ref.id)
			se.waitFor(ctx, clientCloseWait, isClosed)
		case "idle":
			// The server's own idle timeout (the scenario's wait) closes
			// it: wait for that, and for the client's close.
			se.waitFor(ctx, st.sp.wait+clientCloseWait, isClosed)
		case "limit":
			// The server closed it after its last response: wait for the
			// client's close.
			se.waitFor(ctx, clientCloseWait, isClosed)
		}
		se.mu.Lock()
		st.clientClosed = how != "rst" && c.closed
		se.mu.Unlock()
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	return Closed{Protocol: Protocol, Closed: how, ClientClosed: st.clientClosed}, nil
}

// settle waits, at most the scenario's wait and a second, until the client
// has closed the connection its warm-ups came on, which the fault made
// unusable.
func (se *session) settle(ctx context.Context, st *scenarioState) (Closed, error) {
	se.mu.Lock()
	w := warmUps(st.sp)
	if !st.sp.Settle || w == 0 || len(st.fault) < w {
		se.mu.Unlock()
		return Closed{}, &apiErr{code: http.StatusConflict,
			msg: fmt.Sprintf("scenario %s: no warm-up connection to settle (the warm-ups were not seen, or it has none)", st.sp.Name)}
	}
	c := st.fault[w-1].conn
	se.mu.Unlock()
	se.waitFor(ctx, st.sp.wait+clientCloseWait, func() bool { return c.closed })
	se.mu.Lock()
	defer se.mu.Unlock()
	if !c.closed {
		st.openAtSettle = c
	}
	return Closed{Protocol: Protocol, ClientClosed: c.closed}, nil
}

// report records a kit's report, checked (validReport), and judges the
// scenario.
func (s *Server) report(ctx context.Context, se *session, rep KitReport) (*Result, error) {
	se.mu.Lock()
	if se.done {
		se.mu.Unlock()
		return nil, sessionDone(se.id)
	}
	var st *scenarioState
	for _, x := range se.states {
		if x.spec.Name == rep.Scenario {
			st = x
		}
	}
	if st == nil {
		se.mu.Unlock()
		return nil, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no scenario %q in session %s", printable(rep.Scenario), se.id)}
	}
	if st.report != nil {
		se.mu.Unlock()
		return nil, &apiErr{code: http.StatusConflict, msg: fmt.Sprintf("scenario %s was reported already", st.sp.Name)}
	}
	st.report = &rep
	if st.guard != nil {
		st.guard.Stop()
	}
	se.current(st.idx)
	se.mu.Unlock()

	// What the client does to its connections after the call (closing
	// the one a timeout left, say) may come a little after the report:
	// wait for it, bounded.
	fs := s.faults[min(st.sp.on, onRawH2)]
	se.waitFor(ctx, time.Second, func() bool { return settled(st, fs) })
	se.mu.Lock()
	defer se.mu.Unlock()
	st.result = judged(se, st, fs)
	return st.result, nil
}

// end ends a session: it waits (at most a second) for the client's
// connections to close, judges what was not reported, frees the session's
// endpoints and listeners, hands its report to OnSessionEnd and returns
// it. A second call returns nil: the session was ended already.
func (s *Server) end(se *session, why string) *SessionReport {
	s.mu.Lock()
	se.mu.Lock()
	if se.done {
		se.mu.Unlock()
		s.mu.Unlock()
		return nil
	}
	se.done = true
	s.beginEnd()
	for _, st := range se.states {
		if st.guard != nil {
			st.guard.Stop()
		}
	}
	se.mu.Unlock()
	s.mu.Unlock()
	se.waitFor(s.ctx, time.Second, func() bool { return se.openConns() == 0 })

	se.mu.Lock()
	rep := sessionReport(se, why, s.faults)
	for _, st := range se.states {
		for _, f := range s.faults {
			f.Remove(st.faultPath)
			f.Remove(st.okPath)
			f.Remove(st.holdPath)
			f.Remove(st.warmPath)
		}
	}
	stall, hang, ports := se.stall, se.hang, se.ports
	conns := se.conns
	se.mu.Unlock()

	s.mu.Lock()
	for _, c := range conns {
		c.se = nil // the rest of its life is no session's
	}
	delete(s.sessions, se.id)
	s.ends.remember(se.id)
	s.mu.Unlock()
	if stall != nil {
		stall.Close()
	}
	if hang != nil {
		hang.Close()
	}
	for _, release := range ports {
		release()
	}
	s.finishEnd(rep)
	return rep
}

// openConns counts the session's connections still open; se.mu is held.
func (se *session) openConns() int {
	n := 0
	for _, c := range se.conns {
		if !c.closed {
			n++
		}
	}
	return n
}

// waitFor waits, at most d, until cond (called with se.mu held) holds: it
// wakes at every change of the session's connections, and every 5 ms for
// the fault servers' counters, which signal no change of the session's.
func (se *session) waitFor(ctx context.Context, d time.Duration, cond func() bool) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		se.mu.Lock()
		if cond() {
			se.mu.Unlock()
			return
		}
		ch := se.changes.Next()
		se.mu.Unlock()
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
