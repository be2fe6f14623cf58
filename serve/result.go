package serve

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Result is the verdict on one scenario for one client: what the caller
// got, what the server saw, and every mismatch with the catalogue, in the
// audit's vocabulary.
type Result struct {
	Name     string `json:"name"`
	Contract string `json:"contract,omitempty"`
	Proto    string `json:"proto"`
	Fault    string `json:"fault"`
	// Verdict says what became of the scenario: "pass", "fail", or no
	// verdict on the client, and why: "not-configurable" (the client has
	// no equivalent of a setting it needs), "skipped" (the kit did not
	// run it), "not-reported" (the kit never reported it, which fails the
	// session).
	Verdict string `json:"verdict"`
	// Pass is set when the scenario passed. A result that did not pass
	// failed only when its Verdict is "fail": one with no verdict
	// (NotConfigurable, Skipped) neither passes nor fails, as a skipped
	// result of the audit's does not ([audit.Result.Skipped]).
	Pass bool `json:"pass"`
	// Caller is what the kit reported the caller got; Expected what it
	// must get.
	Caller   *Outcome    `json:"caller,omitempty"`
	Expected Expectation `json:"expected"`
	// Class and Stage are the caller's outcome in the audit's vocabulary:
	// the kind the kit reported, made precise by what the server did (a
	// timeout while the server held the headers is a
	// response-header-timeout at await-headers when the scenario bounds
	// the read, a deadline when it bounds the attempt).
	Class vocab.Class `json:"class,omitempty"`
	Stage vocab.Stage `json:"stage,omitempty"`
	// Attempts is the kit's count of its client's attempts, if it gave
	// one; ElapsedMS the call's time as the kit measured it.
	Attempts  *int     `json:"attempts,omitempty"`
	ElapsedMS float64  `json:"elapsed_ms"`
	Server    Evidence `json:"server"`
	// Fate is what became of the faulted request's connection, as the
	// audit says it: "reused", "closed by client (request-error)", "-".
	Fate string `json:"fate"`
	// HiddenRetry is set when the server saw more requests than the
	// attempts the kit reported: the client replayed by itself.
	HiddenRetry bool `json:"hidden_retry,omitempty"`
	// Unbounded is set when the server's guard, not a bound of the
	// client, ended the call.
	Unbounded  bool     `json:"unbounded,omitempty"`
	Mismatches []string `json:"mismatches,omitempty"`
	// Fix says, on a failed result, what fixes it, in the client's own
	// terms where the kit named a client this server knows.
	Fix string `json:"fix,omitempty"`
	// Findings are what the verdict shows whether it passed or not: a
	// hidden retry, a loss that could have been avoided.
	Findings []Finding `json:"findings,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
	// Config is how the kit configured the client for the scenario.
	Config string `json:"config,omitempty"`
	// NotConfigurable, Skipped and NotReported say why there is no
	// verdict: the client has no equivalent of a setting the scenario
	// needs, the kit did not run it, or the kit never reported it.
	NotConfigurable string `json:"not_configurable,omitempty"`
	Skipped         string `json:"skipped,omitempty"`
	NotReported     bool   `json:"not_reported,omitempty"`
}

// The verdicts of a [Result]. Only pass and fail are verdicts on the
// client; a scenario not configurable or skipped has none, and fails no
// session (the JUnit output reports it skipped); one not reported fails
// its session (a JUnit failure).
const (
	verdictPass            = "pass"             // it passed
	verdictFail            = "fail"             // it failed: Mismatches say how
	verdictNotConfigurable = "not-configurable" // the client has no equivalent of a setting it needs
	verdictSkipped         = "skipped"          // the kit did not run it
	verdictNotReported     = "not-reported"     // the kit never reported it
)

// verdictOf is res's Verdict.
func verdictOf(res *Result) string {
	switch {
	case res.NotReported:
		return verdictNotReported
	case res.NotConfigurable != "":
		return verdictNotConfigurable
	case res.Skipped != "":
		return verdictSkipped
	case res.Pass:
		return verdictPass
	}
	return verdictFail
}

// judged is judge's verdict with its Verdict set; s.mu is held.
func judged(se *session, st *scenarioState, fs *faultserver.Server) *Result {
	res := judge(se, st, fs)
	res.Verdict = verdictOf(res)
	return res
}

// Evidence is what the server saw of a scenario.
type Evidence struct {
	// Requests counts the requests read for the faulted URL (a warm-up
	// left out), every attempt and hidden replay included.
	Requests        int64 `json:"requests"`
	HandlersEntered int64 `json:"handlers_entered"`
	// Unread counts the requests the server closed a connection on
	// without reading them (sent on a connection already being closed).
	Unread          int64    `json:"unread,omitempty"`
	CancelsObserved int64    `json:"cancels_observed"`
	Writes          int64    `json:"writes"`
	IdempotencyKeys []string `json:"idempotency_keys,omitempty"`
	// Connections are those the scenario's requests came on, in order.
	Connections []ConnEvidence `json:"connections"`
	// AttemptGapsMS is the time between one faulted request and the next.
	AttemptGapsMS []float64 `json:"attempt_gaps_ms,omitempty"`
	// OKConn is the connection that served /ok (0: none seen); OKReused
	// whether it was the faulted request's.
	OKConn   uint64 `json:"ok_conn,omitempty"`
	OKReused bool   `json:"ok_reused"`
	// ConnsAccepted counts the TCP connections a listener below HTTP
	// accepted (tls-handshake-stall).
	ConnsAccepted int64 `json:"conns_accepted,omitempty"`
	// CutAfterMS is set when the guard cut the call: that long after the
	// guard started.
	CutAfterMS float64 `json:"cut_after_ms,omitempty"`
}

// ConnEvidence is one connection as the server saw it.
type ConnEvidence struct {
	ID       uint64 `json:"id"`
	Requests int    `json:"requests"`
	Reused   bool   `json:"reused"`
	// ClosedBy is "client" or "server", empty while it is open; How is
	// "fin" or "rst"; ClosedAfterMS the time from the last request read
	// on it to the close.
	ClosedBy      string  `json:"closed_by,omitempty"`
	How           string  `json:"how,omitempty"`
	ClosedAfterMS float64 `json:"closed_after_ms,omitempty"`
	// AcceptedAt is when the server accepted it, FirstRequestAt when it
	// read its first request, ClosedAt when it closed (absent: open);
	// RequestsAt when it read each of this scenario's requests on it.
	AcceptedAt     time.Time   `json:"accepted_at"`
	FirstRequestAt time.Time   `json:"first_request_at,omitzero"`
	ClosedAt       time.Time   `json:"closed_at,omitzero"`
	RequestsAt     []time.Time `json:"requests_at,omitempty"`
}

// Finding is something a verdict shows whether its scenario passed or not,
// or a problem of the client as a whole.
type Finding struct {
	// Class says what kind of finding it is.
	Class FindingClass `json:"class"`
	// Scenario is the scenario it is about ("" for the client as a whole).
	Scenario string `json:"scenario,omitempty"`
	Text     string `json:"text"`
	Fix      string `json:"fix,omitempty"`
	// Fails is set when the finding fails the session by itself.
	Fails bool `json:"fails,omitempty"`
}

// FindingClass says what kind of finding a [Finding] is.
type FindingClass string

// The classes of findings.
const (
	// FindingHiddenRetry: the server read more requests than the attempts
	// the kit reported: the client sent a request again by itself.
	FindingHiddenRetry FindingClass = "hidden-retry"
	// FindingLossToCaller: the caller got a lost connection's error where
	// the server had read none of the request, so sending it again would
	// have been safe.
	FindingLossToCaller FindingClass = "loss-to-caller"
	// FindingOpenAtDone: the client still held connections open after its
	// kit said done (a finding that does not fail the session: from
	// outside, a pool not closed and a body left open look alike).
	FindingOpenAtDone FindingClass = "open-at-done"
)

// SessionReport is the verdicts on one client: one [Result] per scenario
// offered, in order, and the findings about the client as a whole.
type SessionReport struct {
	Protocol        string   `json:"protocol"`
	Session         string   `json:"session"`
	Kit             string   `json:"kit"`
	Client          Client   `json:"client"`
	Protocols       []string `json:"protocols"`
	Passed          int      `json:"passed"`
	Failed          int      `json:"failed"`
	NotConfigurable int      `json:"not_configurable"`
	Skipped         int      `json:"skipped"`
	NotReported     int      `json:"not_reported"`
	// Findings are the client's findings: of the client as a whole
	// (connections it still held open after it said it was done) and of
	// its scenarios (a hidden retry, a loss to the caller). None of those
	// this server makes fails the session by itself (their Fails is
	// false): a scenario's goes with its scenario's verdict.
	Findings []Finding `json:"findings,omitempty"`
	// OpenAtDone counts those connections.
	OpenAtDone int `json:"open_at_done"`
	// Error says why the session ended without the kit's done, or what
	// the kit said when it gave up.
	Error     string   `json:"error,omitempty"`
	OK        bool     `json:"ok"`
	ElapsedMS float64  `json:"elapsed_ms"`
	Results   []Result `json:"results"`
	// Limits says what was recorded only as a count (past the limits).
	Limits string `json:"limits,omitempty"`
}

// sessionReport builds the report of an ending session; s.mu is held.
func sessionReport(se *session, why string, faults [3]*faultserver.Server) *SessionReport {
	r := &SessionReport{Protocol: Protocol, Session: se.id, Kit: se.kit, Client: se.client, Protocols: se.protocols,
		Error: why, ElapsedMS: ms(time.Since(se.started))}
	for _, st := range se.states {
		res := st.result
		if res == nil {
			res = judged(se, st, faults[min(st.sp.on, onRawH2)])
			if res.NotReported && why != "" {
				res.Mismatches = []string{"not reported: the session ended before the kit reported it"}
			}
		}
		switch res.Verdict {
		case verdictNotReported:
			r.NotReported++
		case verdictNotConfigurable:
			r.NotConfigurable++
		case verdictSkipped:
			r.Skipped++
		case verdictPass:
			r.Passed++
		default:
			r.Failed++
		}
		r.Results = append(r.Results, *res)
		for _, f := range res.Findings {
			f.Scenario = res.Name
			r.Findings = append(r.Findings, f)
		}
	}
	r.OpenAtDone = se.openConns()
	if r.OpenAtDone > 0 {
		// Which scenarios opened them, and which used them last: a
		// client's pool may carry a connection across scenarios.
		var opened, last []string
		for _, c := range se.conns {
			if c.closed {
				continue
			}
			if c.scenario < len(se.states) && !slices.Contains(opened, se.states[c.scenario].sp.Name) {
				opened = append(opened, se.states[c.scenario].sp.Name)
			}
			if c.last < len(se.states) && !slices.Contains(last, se.states[c.last].sp.Name) {
				last = append(last, se.states[c.last].sp.Name)
			}
		}
		text := fmt.Sprintf("the client still holds %s open a second after the kit said done (opened in %s",
			text.Plural(int64(r.OpenAtDone), "connection"), strings.Join(opened, ", "))
		if !slices.Equal(opened, last) {
			text += "; last used in " + strings.Join(last, ", ")
		}
		text += "): its pool was not closed, or a response body was left open; from outside the two look " +
			"alike, so this does not fail the session (an in-process audit tells them apart)"
		r.Findings = append(r.Findings, Finding{Class: FindingOpenAtDone, Text: text, Fix: say(se.terms, tOpenAtDone)})
	}
	if se.extraConn > 0 || se.extraReqs > 0 {
		r.Limits = fmt.Sprintf("%d connections and %d requests past the session's limits were counted, not recorded", se.extraConn, se.extraReqs)
	}
	failing := slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Fails })
	r.OK = r.Failed == 0 && r.NotReported == 0 && r.Passed > 0 && !failing && why == ""
	return r
}
