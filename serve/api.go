package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
)

// apiErr is an error the control API answers with its status.
type apiErr struct {
	code int
	msg  string
}

func (e *apiErr) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiErr{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// printable makes a kit's text safe to print: at most maxMessage bytes,
// its secrets masked and its control, bidirectional and invisible
// characters escaped, as every output's are ([redact.Text]).
func printable(s string) string {
	if len(s) > maxMessage {
		s = s[:maxMessage]
	}
	return redact.Text(s)
}

// routes is the control API.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", s.handleOpen)
	mux.HandleFunc("GET /v1/sessions/{id}/scenarios", s.handleScenarios)
	mux.HandleFunc("GET /v1/sessions/{id}/entered", s.handleEntered)
	mux.HandleFunc("POST /v1/sessions/{id}/close", s.handleClose)
	mux.HandleFunc("POST /v1/sessions/{id}/reports", s.handleReport)
	mux.HandleFunc("POST /v1/sessions/{id}/done", s.handleDone)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no such endpoint: %s %s (%s: docs/serve.md)",
			r.Method, printable(r.URL.Path), Protocol)})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiErr
	if !errors.As(err, &ae) {
		ae = &apiErr{code: http.StatusInternalServerError, msg: err.Error()}
	}
	writeJSON(w, ae.code, apiError{Protocol: Protocol, Error: ae.msg})
}

// decode reads one JSON object of at most maxBody bytes into v, refusing
// unknown fields and trailing data.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("reading the body: %v", err)
	}
	if len(body) > maxBody {
		return &apiErr{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the body is over %d bytes", maxBody)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON: %s", printable(err.Error()))
	}
	if dec.More() {
		return badRequest("malformed JSON: data after the object")
	}
	return nil
}

func (s *Server) handleOpen(w http.ResponseWriter, r *http.Request) {
	var req OpenRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	se, err := s.open(req)
	if err != nil {
		writeErr(w, err)
		return
	}
	base := s.URL() + "/v1/sessions/" + se.id
	writeJSON(w, http.StatusCreated, Opened{Protocol: Protocol, Session: se.id, ScenariosURL: base + "/scenarios",
		ReportURL: base + "/reports", DoneURL: base + "/done"})
}

func (s *Server) handleScenarios(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	s.mu.Lock()
	out := Scenarios{Protocol: Protocol, Session: se.id}
	for _, st := range se.states {
		out.Scenarios = append(out.Scenarios, st.spec)
	}
	if !se.fetched {
		se.fetched = true
		s.current(se, -1)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// maxEnteredWait bounds a long poll of entered_url.
const maxEnteredWait = 10 * time.Second

func (s *Server) handleEntered(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	q := r.URL.Query()
	idx, err := strconv.Atoi(q.Get("scenario"))
	s.mu.Lock()
	n := len(se.states)
	var st *scenarioState
	if err == nil && idx >= 0 && idx < n {
		st = se.states[idx]
	}
	s.mu.Unlock()
	if st == nil {
		writeErr(w, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no scenario %q in session %s", printable(q.Get("scenario")), se.id)})
		return
	}
	wait := maxEnteredWait
	if t := q.Get("timeout_ms"); t != "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v <= 0 || math.IsNaN(v) {
			writeErr(w, badRequest("timeout_ms %q is not a positive number", printable(t)))
			return
		}
		wait = min(wait, time.Duration(v*float64(time.Millisecond)))
	}
	path, on := st.faultPath, st.sp.on
	if q.Get("what") == "hold" {
		path, on = st.holdPath, onPlain
	}
	if on > onRawH2 {
		writeErr(w, badRequest("scenario %s has no handler to enter", st.sp.name))
		return
	}
	fs := s.faults[on]
	t := time.NewTimer(wait)
	defer t.Stop()
	entered := fs.Entered(path)
	for fs.Counters(path).HandlersEntered == 0 {
		select {
		case <-entered:
		case <-t.C:
			writeJSON(w, http.StatusRequestTimeout, apiError{Protocol: Protocol,
				Error: fmt.Sprintf("the handler of %s was not entered within %v", st.sp.name, wait)})
			return
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			writeErr(w, &apiErr{code: 503, msg: "the server is stopping"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"protocol": Protocol, "entered": fs.Counters(path).HandlersEntered})
}

// scenarioOf returns the scenario of se that the query parameter
// "scenario" names, or answers 404 and returns nil.
func (s *Server) scenarioOf(w http.ResponseWriter, r *http.Request, se *session) *scenarioState {
	q := r.URL.Query().Get("scenario")
	idx, err := strconv.Atoi(q)
	s.mu.Lock()
	var st *scenarioState
	if err == nil && idx >= 0 && idx < len(se.states) {
		st = se.states[idx]
	}
	s.mu.Unlock()
	if st == nil {
		writeErr(w, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no scenario %q in session %s", printable(q), se.id)})
	}
	return st
}

// clientCloseWait bounds how long close_url waits for the client to close
// its side of a connection the server closed with a FIN.
const clientCloseWait = time.Second

// Closed answers POST …/close: how the server closed the scenario's
// kept-alive connection, and whether the client had closed its side by
// then (after a FIN the server waits for it, at most a second; after an
// RST it cannot see it).
type Closed struct {
	Protocol     string `json:"protocol"`
	Closed       string `json:"closed"`
	ClientClosed bool   `json:"client_closed"`
}

// handleClose closes, as the scenario says (FIN or RST), the kept-alive
// connection its warm-up request came on, once; a second call answers as
// the first did.
func (s *Server) handleClose(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	st := s.scenarioOf(w, r, se)
	if st == nil {
		return
	}
	s.mu.Lock()
	how := st.sp.close
	switch {
	case how == "":
		s.mu.Unlock()
		writeErr(w, badRequest("scenario %s has no connection for the server to close", st.sp.name))
		return
	case st.closed == nil && len(st.fault) == 0:
		s.mu.Unlock()
		writeErr(w, &apiErr{code: http.StatusConflict, msg: fmt.Sprintf("scenario %s: the warm-up request was not seen, so no kept-alive connection is there to close", st.sp.name)})
		return
	}
	first := st.closed == nil
	if first {
		st.closed = st.fault[0].conn
	}
	c := st.closed
	s.mu.Unlock()
	if first {
		fs := s.faults[st.sp.on]
		if how == "rst" {
			fs.ResetConn(c.ref.id)
		} else {
			fs.CloseWriteConn(c.ref.id)
			s.waitFor(r.Context(), se, clientCloseWait, func() bool { return c.closed })
		}
		s.mu.Lock()
		st.clientClosed = how == "fin" && c.closed
		s.mu.Unlock()
	}
	s.mu.Lock()
	out := Closed{Protocol: Protocol, Closed: how, ClientClosed: st.clientClosed}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	var rep KitReport
	if err := decode(r, &rep); err != nil {
		writeErr(w, err)
		return
	}
	res, err := s.report(r.Context(), se, rep)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleDone(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	var d Done
	if err := decode(r, &d); err != nil {
		writeErr(w, err)
		return
	}
	why := ""
	if d.Error != "" {
		why = "the kit gave up: " + printable(d.Error)
	}
	writeJSON(w, http.StatusOK, s.end(se, why))
}

// validOutcome checks an outcome of a report.
func validOutcome(name string, o *Outcome) error {
	if o == nil {
		return badRequest("%s is missing", name)
	}
	if bad := math.IsNaN(o.ElapsedMS) || math.IsInf(o.ElapsedMS, 0) || o.ElapsedMS < 0; bad {
		return badRequest("%s.elapsed_ms is not a time", name)
	}
	switch {
	case o.Error == nil && (o.Status < 100 || o.Status > 599):
		return badRequest("%s has neither a status in 100..599 nor an error", name)
	case o.Error != nil && o.Status != 0:
		return badRequest("%s has both a status and an error", name)
	case o.Error != nil:
		switch o.Error.Kind {
		case KindTimeout, KindConnection, KindCanceled, KindPool, KindOther:
		default:
			return badRequest("%s.error.kind %q is not one of timeout, connection, canceled, pool, other", name, printable(o.Error.Kind))
		}
		o.Error.Message = printable(o.Error.Message)
	}
	return nil
}

// report records a kit's report and judges the scenario.
func (s *Server) report(ctx context.Context, se *session, rep KitReport) (*Result, error) {
	given := 0
	for _, v := range []bool{rep.Outcome != nil, rep.NotConfigurable != "", rep.Skipped != ""} {
		if v {
			given++
		}
	}
	if given != 1 {
		return nil, badRequest("a report has exactly one of outcome, not_configurable, skipped")
	}
	if rep.Outcome != nil {
		if err := validOutcome("outcome", rep.Outcome); err != nil {
			return nil, err
		}
		if rep.OK != nil {
			if err := validOutcome("ok", rep.OK); err != nil {
				return nil, err
			}
		}
	}
	if math.IsNaN(rep.ElapsedMS) || math.IsInf(rep.ElapsedMS, 0) || rep.ElapsedMS < 0 {
		return nil, badRequest("elapsed_ms is not a time")
	}
	if rep.Attempts != nil && (*rep.Attempts < 0 || *rep.Attempts > 1000) {
		return nil, badRequest("attempts %d is not in 0..1000", *rep.Attempts)
	}
	rep.Config, rep.NotConfigurable, rep.Skipped = printable(rep.Config), printable(rep.NotConfigurable), printable(rep.Skipped)

	s.mu.Lock()
	if se.done {
		s.mu.Unlock()
		return nil, &apiErr{code: http.StatusConflict, msg: "the session is done"}
	}
	var st *scenarioState
	for _, x := range se.states {
		if x.spec.Name == rep.Scenario {
			st = x
		}
	}
	if st == nil {
		s.mu.Unlock()
		return nil, &apiErr{code: http.StatusNotFound, msg: fmt.Sprintf("no scenario %q in session %s", printable(rep.Scenario), se.id)}
	}
	if st.report != nil {
		s.mu.Unlock()
		return nil, &apiErr{code: http.StatusConflict, msg: fmt.Sprintf("scenario %s was reported already", st.sp.name)}
	}
	st.report = &rep
	if st.guard != nil {
		st.guard.Stop()
	}
	s.current(se, st.idx)
	s.mu.Unlock()

	// What the client does to its connections after the call (closing
	// the one a timeout left, say) may come a little after the report:
	// wait for it, bounded.
	fs := s.faults[min(st.sp.on, onRawH2)]
	s.waitFor(ctx, se, time.Second, func() bool { return settled(st, fs) })
	s.mu.Lock()
	defer s.mu.Unlock()
	st.result = judge(se, st, fs)
	return st.result, nil
}

// end ends a session: it waits (at most a second) for the client's
// connections to close, judges what was not reported, frees the session's
// endpoints and listeners, and returns its report. A second call returns
// the same report.
func (s *Server) end(se *session, why string) *SessionReport {
	s.mu.Lock()
	if se.done {
		for _, r := range s.ended {
			if r.Session == se.id {
				s.mu.Unlock()
				return r
			}
		}
		s.mu.Unlock()
		return &SessionReport{Protocol: Protocol, Session: se.id, Kit: se.kit, Client: se.client, Error: "ended"}
	}
	se.done = true
	for _, st := range se.states {
		if st.guard != nil {
			st.guard.Stop()
		}
	}
	s.mu.Unlock()
	s.waitFor(s.ctx, se, time.Second, func() bool { return openConns(se) == 0 })

	s.mu.Lock()
	rep := sessionReport(se, why, s.faults)
	for _, st := range se.states {
		for _, f := range s.faults {
			f.Remove(st.faultPath)
			f.Remove(st.okPath)
			f.Remove(st.holdPath)
		}
	}
	for ref, c := range s.conns {
		if c.se == se {
			c.se = nil // the rest of its life is no session's
			_ = ref
		}
	}
	delete(s.sessions, se.id)
	s.ended = append(s.ended, rep)
	if len(s.ended) > MaxSessions {
		s.ended = s.ended[len(s.ended)-MaxSessions:]
	}
	stall, hang := se.stall, se.hang
	s.mu.Unlock()
	select {
	case s.endedCh <- struct{}{}:
	default:
	}
	if stall != nil {
		stall.Close()
	}
	if hang != nil {
		hang.Close()
	}
	return rep
}

func openConns(se *session) int {
	n := 0
	for _, c := range se.conns {
		if !c.closed {
			n++
		}
	}
	return n
}

// waitFor waits, at most d, until cond (called with s.mu held) holds: it
// wakes at every change of the session's connections, and every 5 ms for
// the fault servers' counters, which signal no change of the session's.
func (s *Server) waitFor(ctx context.Context, se *session, d time.Duration, cond func() bool) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		if cond() {
			s.mu.Unlock()
			return
		}
		ch := se.changes.Next()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
