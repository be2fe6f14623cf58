package serve

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
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
	Pass     bool   `json:"pass"`
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
	Fix   string   `json:"fix,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Config is how the kit configured the client for the scenario.
	Config string `json:"config,omitempty"`
	// NotConfigurable, Skipped and NotReported say why there is no
	// verdict: the client has no equivalent of a setting the scenario
	// needs, the kit did not run it, or the kit never reported it.
	NotConfigurable string `json:"not_configurable,omitempty"`
	Skipped         string `json:"skipped,omitempty"`
	NotReported     bool   `json:"not_reported,omitempty"`
}

// Evidence is what the server saw of a scenario.
type Evidence struct {
	// Requests counts the requests read for the faulted URL (a warm-up
	// left out), every attempt and hidden replay included.
	Requests        int64    `json:"requests"`
	HandlersEntered int64    `json:"handlers_entered"`
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
}

// settled reports whether what the scenario expects of the client after
// its call (a connection it closes, a cancel the server observes) has
// happened; s.mu is held.
func settled(st *scenarioState, fs *faultserver.Server) bool {
	e := st.sp.audit
	if st.report == nil || st.report.Outcome == nil || st.cut {
		return true
	}
	if e.CancelObserved && st.sp.on <= onRawH2 && fs.Counters(st.faultPath).CancelsObserved == 0 {
		return false
	}
	if f := e.Fate; f != nil && f.ClosedBy != "" && st.sp.judgeFate && len(st.fault) > 0 {
		return st.fault[len(st.fault)-1].conn.closed
	}
	return true
}

// classPool is the class of a call the client's pool refused (its acquire
// timeout, Reactor Netty's pendingAcquireTimeout), said as the kit's kind:
// not a deadline of the caller's, a refusal of the pool's.
const classPool vocab.Class = "pool"

// classOf states the caller's outcome in the audit's vocabulary, made
// precise by what the server did.
func classOf(o *Outcome, sp *spec) (vocab.Class, vocab.Stage) {
	switch {
	case o.Error == nil:
		return vocab.ClassOK, ""
	case o.Error.Kind == KindTimeout && sp.timeoutClass != "":
		return sp.timeoutClass, sp.stage
	case o.Error.Kind == KindTimeout:
		return vocab.ClassTimeout, sp.stage
	case o.Error.Kind == KindConnection && sp.connClass != "":
		return sp.connClass, sp.stage
	case o.Error.Kind == KindCanceled:
		return vocab.ClassCanceled, sp.stage
	case o.Error.Kind == KindPool:
		return classPool, vocab.StagePoolWait
	}
	return vocab.ClassError, sp.stage
}

// expectText says an expectation of the caller's.
func expectText(e Expectation) string {
	if e.Error != "" {
		return e.Error + " error"
	}
	return fmt.Sprintf("status %d", e.Status)
}

// callerText says what the caller got.
func callerText(o *Outcome) string {
	if o.Error != nil {
		s := o.Error.Kind + " error"
		if o.Error.Message != "" {
			s += " (" + firstLine(o.Error.Message) + ")"
		}
		return s
	}
	return fmt.Sprintf("status %d", o.Status)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// failure is what a mismatch is about, for the fix.
type failure string

const (
	failUnbounded     failure = "unbounded"      // no bound of the client's fired
	failRetriedStatus failure = "retried-status" // a status outside retry_statuses was retried
	failRetriedError  failure = "retried-error"  // an error or timeout was retried
	failNotRetried    failure = "not-retried"    // a status the policy retries was not, or not as often
	failTooMany       failure = "too-many"       // more retries than max_retries
	failBudget        failure = "budget"         // the total budget did not end the call
	failPost          failure = "post"           // a POST replayed against its rule, or not as allowed
	failKey           failure = "key"            // the idempotency key was not kept across attempts
	failLastStatus    failure = "last-status"    // retries exhausted: the last response not handed back
	failCancel        failure = "cancel"         // the server did not see the client go
	failRecovery      failure = "recovery"       // /ok did not succeed
	failHidden        failure = "hidden"         // a hidden replay
	failOutcome       failure = "outcome"        // another outcome than expected
	failFate          failure = "fate"           // the connection's fate
	failPool          failure = "pool"           // the pool of one did not hold
	failStale         failure = "stale"          // a connection the server had closed was used
)

// judge combines the kit's report with the server's evidence; s.mu is held.
func judge(se *session, st *scenarioState, fs *faultserver.Server) *Result {
	sp := st.sp
	rep := st.report
	res := &Result{Name: sp.name, Contract: sp.contract, Proto: string(sp.proto), Fault: sp.faultText, Expected: sp.caller}
	var fails []failure
	if rep == nil {
		res.NotReported = true
		res.Mismatches = []string{"not reported: the kit said done without reporting this scenario"}
		res.Server, res.Fate = evidence(se, st, fs), "-"
		return res
	}
	res.Config = rep.Config
	if rep.NotConfigurable != "" || rep.Skipped != "" {
		res.NotConfigurable, res.Skipped = rep.NotConfigurable, rep.Skipped
		res.Server, res.Fate = evidence(se, st, fs), "-"
		return res
	}
	ev := evidence(se, st, fs)
	res.Server, res.Caller, res.Attempts, res.ElapsedMS = ev, rep.Outcome, rep.Attempts, rep.ElapsedMS
	res.Class, res.Stage = classOf(rep.Outcome, sp)
	fate := fateOf(st, rep)
	res.Fate = fate.String()
	add := func(f failure, format string, args ...any) {
		m := fmt.Sprintf(format, args...)
		if sp.contract != "" {
			m = sp.contract + ": " + m
		}
		res.Mismatches = append(res.Mismatches, m)
		if !slices.Contains(fails, f) {
			fails = append(fails, f)
		}
	}
	e := sp.audit
	if st.cut {
		res.Unbounded = true
		ev.CutAfterMS = ms(st.cutAt.Sub(st.guardFrom))
		res.Server = ev
		if ev.Requests > 1 {
			add(failUnbounded, "unbounded: the call had not ended within the server's guard (%v), after %s: the server cut it",
				guardFor(sp), plural(ev.Requests, "request"))
		} else {
			add(failUnbounded, "unbounded: no timeout fired at stage %s within the server's guard (%v): the server cut the call",
				stageOf(sp), guardFor(sp))
		}
	}
	o := rep.Outcome
	either := sp.either && (o.Error != nil && o.Error.Kind == KindConnection && ev.Requests == 1 ||
		o.Error == nil && o.Status == 200 && ev.Requests == 2)
	if !res.Unbounded && !either {
		switch {
		case sp.caller.Error != "" && (o.Error == nil || o.Error.Kind != sp.caller.Error):
			add(failOutcome, "outcome: expected %s (%s), observed %s", expectText(sp.caller), e.Class, callerText(o))
		case sp.caller.Error == "" && o.Error != nil:
			add(failOutcome, "outcome: expected %s, observed %s", expectText(sp.caller), callerText(o))
		case sp.caller.Error == "" && o.Status != sp.caller.Status:
			if sp.contract != "" && o.Status == 200 && sp.caller.Status == 503 {
				add(failLastStatus, "status: expected the last 503, observed %d", o.Status)
			} else {
				add(failOutcome, "status: expected %d, observed %d", sp.caller.Status, o.Status)
			}
		}
		if sp.contract != "" && sp.caller.Status == 503 && o.Error != nil {
			fails = append(fails, failLastStatus)
		}
	}
	if late := lateBound(sp); !res.Unbounded && sp.caller.Error == KindTimeout && o.Error != nil && o.Error.Kind == KindTimeout &&
		late > 0 && sp.contract == "" && time.Duration(rep.ElapsedMS*float64(time.Millisecond)) > late {
		add(failUnbounded, "the timeout came after %.1fs, more than ten times the bound the policy sets: not that bound",
			rep.ElapsedMS/1000)
	}
	if res.Attempts != nil && ev.Requests > int64(*res.Attempts) {
		res.HiddenRetry = true
	}
	// extra is what one too many requests is about: the client's own
	// replay when the retry layer made no more attempts than it should
	// (its fix is the client's, not the retry layer's), else the retry's.
	extra := func() failure {
		if res.HiddenRetry && *res.Attempts <= max(1, e.ClientAttempts) {
			return failHidden
		}
		return retriedWhat(sp, o)
	}
	switch {
	case sp.close != "":
		closedChecks(st, ev, res, add)
	case sp.either:
		switch {
		case res.HiddenRetry:
			res.Notes = append(res.Notes, fmt.Sprintf("hidden retry: the server saw %d requests for %d attempt(s)", ev.Requests, *res.Attempts))
		case ev.Requests > 1 && res.Attempts == nil:
			res.Notes = append(res.Notes, fmt.Sprintf("replayed: the server saw %d requests; the kit gave no attempt count (a hidden retry or the retry layer's)", ev.Requests))
		case ev.Requests == 1 && o.Error != nil:
			res.Notes = append(res.Notes, "no hidden retry: the caller got the connection's loss")
		}
		if ev.Requests > 2 || (sp.on == onRawH2 && ev.Requests > 2) {
			add(failTooMany, "server-seen requests: expected at most 2, observed %d", ev.Requests)
		}
	case ev.Requests != e.ServerRequests:
		switch {
		case sp.contract == "A8" && ev.Requests > e.ServerRequests:
			add(failBudget, "%s was retried past the budget: %s, contract %d", sp.subject, plural(ev.Requests, "request"), e.ServerRequests)
		case sp.contract != "" && ev.Requests > e.ServerRequests:
			add(extra(), "%s was retried: %s, contract %d", sp.subject, plural(ev.Requests, "request"), e.ServerRequests)
		case sp.contract != "":
			f := failNotRetried
			if sp.contract == "A8" {
				f = failBudget
			}
			add(f, "%s was not retried as the contract says: %s, contract %d", sp.subject, plural(ev.Requests, "request"), e.ServerRequests)
		case sp.name == "pool-acquire-timeout":
			add(failPool, "server-seen requests: expected 0 (the second caller waits for the one connection), observed %d", ev.Requests)
		default:
			add(extra(), "server-seen requests: expected %d, observed %d", e.ServerRequests, ev.Requests)
		}
	}
	if res.HiddenRetry && !sp.either && sp.close == "" && ev.Requests != e.ServerRequests {
		add(failHidden, "hidden retry: the server saw %d requests for %d client attempts", ev.Requests, *res.Attempts)
	}
	if sp.contract == "A8" && o.Error == nil && !res.Unbounded {
		fails = append(fails, failBudget)
	}
	if e.Writes != nil && ev.Writes != *e.Writes {
		add(failPost, "the server committed %s, contract %d", plural(ev.Writes, "write"), *e.Writes)
	}
	if sp.request.KeyPerAttempt == "" && sp.request.Headers["Idempotency-Key"] != "" && len(ev.IdempotencyKeys) > 1 {
		for _, k := range ev.IdempotencyKeys[1:] {
			if k != ev.IdempotencyKeys[0] {
				add(failKey, "the idempotency key changed between attempts: %s", strings.Join(ev.IdempotencyKeys, ", "))
				break
			}
		}
	}
	if e.HandlersEntered != nil && ev.HandlersEntered != *e.HandlersEntered {
		add(failCancel, "handler entries: expected %d, observed %d", *e.HandlersEntered, ev.HandlersEntered)
	}
	if e.CancelObserved && ev.CancelsObserved == 0 && !res.Unbounded && sp.on <= onRawH2 {
		add(failCancel, "the server did not observe the client's cancel: the connection stayed open")
	}
	if e.ConnsAccepted != nil && ev.ConnsAccepted != *e.ConnsAccepted {
		add(failOutcome, "connections the server accepted: expected %d, observed %d", *e.ConnsAccepted, ev.ConnsAccepted)
	}
	if sp.judgeFate && !res.Unbounded {
		if f := e.Fate; f != nil {
			ok := f.ClosedBy == fate.ClosedBy && f.Reason == fate.Reason && f.Reused == fate.Reused && f.None == fate.None
			switch {
			case f.ClosedBy != "" && f.Reason == vocab.ReasonRequestError:
				ok = fate.ClosedBy == vocab.ClosedByClient // how the client closes it is its choice
			case f.Reason == vocab.ReasonServerGoAway, f.Reason == vocab.ReasonConnectionClose:
				// After a GOAWAY or a "Connection: close" either side may
				// close the connection first (a client that read the
				// response may beat the server's own close): the point is
				// that it is not used again.
				ok = fate.ClosedBy != "" && !fate.Reused
			}
			if !ok {
				add(failFate, "connection fate: expected %s, observed %s", f, fate)
			}
		}
		if e.Dials != nil && sp.on <= onRawH2 {
			if d := int64(faultConns(st)); d != *e.Dials {
				f := failFate
				if res.HiddenRetry {
					f = failHidden // the replay's new connection
				}
				add(f, "connections for the faulted request: expected %d, observed %d", *e.Dials, d)
			}
		}
	}
	switch {
	case rep.OK == nil:
		add(failRecovery, "not recovered: the kit reported no /ok")
	case rep.OK.Error != nil || rep.OK.Status != 200:
		add(failRecovery, "not recovered: /ok got %s", callerText(rep.OK))
	case len(st.ok) == 0:
		add(failRecovery, "not recovered: the kit reported /ok, but the server saw no request for it")
	}
	res.Pass = len(res.Mismatches) == 0
	if !res.Pass {
		res.Fix = fixFor(se.client.Name, sp, fails)
	}
	return res
}

// closedChecks judges the requests of a scenario whose kept-alive
// connection the server closed at the kit's asking (idle-close,
// reset-before-send, close-before-send): which connection the request came
// on says whether the client noticed the close, or sent by itself what it
// had not written.
func closedChecks(st *scenarioState, ev Evidence, res *Result, add func(failure, string, ...any)) {
	sp, e := st.sp, st.sp.audit
	if st.closed == nil {
		add(failOutcome, "the kit did not ask the server to close the connection (close_url)")
		return
	}
	onClosed, onNew := 0, 0
	for _, r := range st.fault[1:] {
		if r.conn == st.closed {
			onClosed++
		} else {
			onNew++
		}
	}
	how := map[string]string{"fin": "closed (FIN)", "rst": "reset (RST)"}[sp.close]
	switch {
	case !sp.held:
		switch {
		case st.clientClosed:
			res.Notes = append(res.Notes, "the client closed its side of the idle connection the server closed")
		default:
			res.Notes = append(res.Notes, fmt.Sprintf("the client had not closed its side of the idle connection a %v after the server's FIN", clientCloseWait))
		}
		if onClosed > 0 {
			add(failStale, "the client sent the request on the idle connection the server had %s: %s on it, %d on a new one",
				how, plural(int64(onClosed), "request"), onNew)
		} else if ev.Requests != e.ServerRequests {
			add(failTooMany, "server-seen requests: expected %d, observed %d", e.ServerRequests, ev.Requests)
		}
	case onClosed > 0:
		add(failOutcome, "the server read the POST on the connection before it %s it: the client wrote it before asking for its body, so this scenario does not apply (a kit reports such a client not configurable)",
			map[string]string{"fin": "closed", "rst": "reset"}[sp.close])
	case onNew > 0 && (res.Attempts == nil || *res.Attempts <= 1):
		res.HiddenRetry = true
		add(failHidden, "hidden retry: the server %s the connection the client held for the POST before any of it was written, and the client sent the POST on a new connection by itself: %s for 1 attempt, expected 0 (the loss reaching the caller)",
			how, plural(int64(onNew), "request"))
	case onNew > 0:
		add(failRetriedError, "the loss of the connection was retried: %s, expected 0", plural(int64(onNew), "request"))
	}
}

// retriedWhat says what kind of retry one too many requests is.
func retriedWhat(sp *spec, o *Outcome) failure {
	switch {
	case sp.request.Method == "POST":
		return failPost
	case sp.caller.Error != "" || sp.connClass != "":
		return failRetriedError
	case sp.caller.Status != 0 && sp.caller.Status != 503:
		return failRetriedStatus
	}
	return failTooMany
}

// stageOf is the stage a scenario's call waits in when unbounded.
func stageOf(sp *spec) vocab.Stage {
	switch sp.on {
	case onTLSStall:
		return vocab.StageTLS
	case onConnectHang:
		return vocab.StageConnect
	}
	if sp.stage != "" {
		return sp.stage
	}
	if sp.steps == StepsSecondCaller {
		return vocab.StagePoolWait
	}
	return vocab.StageAwaitHeaders
}

// faultConns counts the connections the faulted requests came on.
func faultConns(st *scenarioState) int {
	var seen []*connRec
	for _, r := range st.fault {
		if !slices.Contains(seen, r.conn) {
			seen = append(seen, r.conn)
		}
	}
	return len(seen)
}

// evidence gathers what the server saw of st; s.mu is held.
func evidence(se *session, st *scenarioState, fs *faultserver.Server) Evidence {
	var ev Evidence
	sp := st.sp
	if sp.on <= onRawH2 {
		c := fs.Counters(st.faultPath)
		ev.Requests, ev.HandlersEntered, ev.CancelsObserved, ev.Writes = c.RequestsRead, c.HandlersEntered, c.CancelsObserved, c.WritesCommitted
		if st.warmed() && ev.Requests > 0 {
			ev.Requests--
			ev.HandlersEntered = max(0, ev.HandlersEntered-1)
		}
		ev.IdempotencyKeys = fs.IdempotencyKeys(st.faultPath)
	}
	if sp.on == onTLSStall && se.stall != nil {
		ev.ConnsAccepted = se.stall.ConnsAccepted()
	}
	var seen []*connRec
	for _, r := range slices.Concat(st.hold, st.fault, st.ok) {
		if !slices.Contains(seen, r.conn) {
			seen = append(seen, r.conn)
		}
	}
	slices.SortFunc(seen, func(a, b *connRec) int { return a.accepted.Compare(b.accepted) })
	for _, c := range seen {
		ce := ConnEvidence{ID: c.ref.id, Requests: c.requests, Reused: c.requests > 1}
		if c.closed {
			ce.ClosedBy, ce.How, ce.ClosedAfterMS = c.closedBy, c.how, ms(c.closedAt.Sub(c.lastReq))
		}
		ev.Connections = append(ev.Connections, ce)
	}
	for i := 1; i < len(st.fault); i++ {
		if st.warmed() && i == 1 {
			continue
		}
		ev.AttemptGapsMS = append(ev.AttemptGapsMS, ms(st.fault[i].at.Sub(st.fault[i-1].at)))
	}
	if len(st.ok) > 0 {
		okc := st.ok[0].conn
		ev.OKConn = okc.ref.id
		ev.OKReused = len(st.fault) > 0 && st.fault[len(st.fault)-1].conn == okc
	}
	return ev
}

// fateOf is what became of the faulted request's connection, as the
// audit says it.
func fateOf(st *scenarioState, rep *KitReport) audit.Fate {
	if st.sp.on > onRawH2 || len(st.fault) == 0 {
		return audit.Fate{None: true}
	}
	c := st.fault[len(st.fault)-1].conn
	if len(st.ok) > 0 && st.ok[0].conn == c {
		return audit.Fate{Reused: true}
	}
	if !c.closed {
		return audit.Fate{}
	}
	if c.closedBy == "server" {
		switch {
		case c.how == "rst":
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerReset}
		case st.sp.fault == faultserver.Fault(faultserver.ConnectionClose{}) && st.sp.proto == audit.HTTP2:
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerGoAway}
		case st.sp.fault == faultserver.Fault(faultserver.ConnectionClose{}):
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonConnectionClose}
		}
		return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerEOF}
	}
	switch {
	case rep != nil && rep.Outcome != nil && rep.Outcome.Error != nil:
		return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonRequestError}
	case st.sp.steps == StepsReadThenClose:
		return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonEarlyBodyClose}
	}
	return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonClient}
}

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
	// Findings are problems of the client as a whole: connections it
	// still held open after it said it was done.
	Findings []string `json:"findings,omitempty"`
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
			res = judge(se, st, faults[min(st.sp.on, onRawH2)])
		}
		switch {
		case res.NotReported:
			r.NotReported++
		case res.NotConfigurable != "":
			r.NotConfigurable++
		case res.Skipped != "":
			r.Skipped++
		case res.Pass:
			r.Passed++
		default:
			r.Failed++
		}
		r.Results = append(r.Results, *res)
	}
	r.OpenAtDone = openConns(se)
	if r.OpenAtDone > 0 {
		var names []string
		for _, c := range se.conns {
			if !c.closed && c.scenario < len(se.states) && !slices.Contains(names, se.states[c.scenario].sp.name) {
				names = append(names, se.states[c.scenario].sp.name)
			}
		}
		f := fmt.Sprintf("the client still holds %s open a second after the kit said done (opened in %s)",
			plural(int64(r.OpenAtDone), "connection"), strings.Join(names, ", "))
		if fix := openAtDoneFix(se.client.Name); fix != "" {
			f += "; fix: " + fix
		}
		r.Findings = append(r.Findings, f)
	}
	if se.extraConn > 0 || se.extraReqs > 0 {
		r.Limits = fmt.Sprintf("%d connections and %d requests past the session's limits were counted, not recorded", se.extraConn, se.extraReqs)
	}
	r.OK = r.Failed == 0 && r.NotReported == 0 && r.Passed > 0 && len(r.Findings) == 0 && why == ""
	return r
}
