package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

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
	mux.HandleFunc("POST /v1/sessions/{id}/settle", s.handleSettle)
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

// The handlers route: each reads its request, calls the session, and
// writes what it answers (calls.go).

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
	writeJSON(w, http.StatusOK, se.scenarios())
}

func (s *Server) handleEntered(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	q := r.URL.Query()
	st, err := se.scenarioAt(q.Get("scenario"))
	if err != nil {
		writeErr(w, err)
		return
	}
	wait := maxEnteredWait
	if t := q.Get("timeout_ms"); t != "" {
		if wait, err = waitMS(t, maxEnteredWait); err != nil {
			writeErr(w, err)
			return
		}
	}
	n, err := s.entered(r.Context(), st, q.Get("what") == "hold", wait)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"protocol": Protocol, "entered": n})
}

func (s *Server) handleClose(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	st, err := se.scenarioAt(r.URL.Query().Get("scenario"))
	if err != nil {
		writeErr(w, err)
		return
	}
	out, err := s.closeWarm(r.Context(), se, st)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request) {
	se, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	st, err := se.scenarioAt(r.URL.Query().Get("scenario"))
	if err != nil {
		writeErr(w, err)
		return
	}
	out, err := se.settle(r.Context(), st)
	if err != nil {
		writeErr(w, err)
		return
	}
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
	if err := validReport(&rep); err != nil {
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
	rep := s.end(se, why)
	if rep == nil {
		writeErr(w, sessionDone(se.id))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// validOutcome checks an outcome of a report.
func validOutcome(name string, o *Outcome) error {
	if o == nil {
		return badRequest("%s is missing", name)
	}
	if err := checkMS(name+".elapsed_ms", o.ElapsedMS); err != nil {
		return err
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

// validReport checks a kit's report, and makes its texts printable.
func validReport(rep *KitReport) error {
	given := 0
	for _, v := range []bool{rep.Outcome != nil, rep.NotConfigurable != "", rep.Skipped != ""} {
		if v {
			given++
		}
	}
	if given != 1 {
		return badRequest("a report has exactly one of outcome, not_configurable, skipped")
	}
	if rep.Outcome != nil {
		if err := validOutcome("outcome", rep.Outcome); err != nil {
			return err
		}
		if rep.OK != nil {
			if err := validOutcome("ok", rep.OK); err != nil {
				return err
			}
		}
	}
	if err := checkMS("elapsed_ms", rep.ElapsedMS); err != nil {
		return err
	}
	if rep.Attempts != nil && (*rep.Attempts < 0 || *rep.Attempts > maxAttempts) {
		return badRequest("attempts %d is not in 0..%d", *rep.Attempts, maxAttempts)
	}
	rep.Config, rep.NotConfigurable, rep.Skipped = printable(rep.Config), printable(rep.NotConfigurable), printable(rep.Skipped)
	return nil
}
