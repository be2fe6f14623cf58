package serve

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
)

// This file judges one scenario: the kit's report and the server's
// evidence against the catalogue's expectation, by a list of short rules.
// Nothing here names a scenario or a contract: each rule reads the
// scenario's data (its Expect, steps, policy, request).

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
	failIdle          failure = "idle"           // the client keeps idle connections as long as the servers, or longer
)

// facts are what the rules judge.
type facts struct {
	se  *session
	st  *scenarioState
	sp  *spec
	rep *KitReport
	o   *Outcome
	ev  Evidence
	// exp is the expectation the outcome is judged by: the scenario's, or
	// its alternative (alt) when the caller got that one.
	exp audit.Expect
	alt bool
	// fresh is set when the faulted request did not come on the warm-up's
	// kept-alive connection: the fault on reuse never met it.
	fresh bool
	fate  audit.Fate
	res   *Result
	fails []failure
}

// add records a mismatch of kind f.
func (f *facts) add(kind failure, format string, args ...any) {
	m := fmt.Sprintf(format, args...)
	if f.sp.Contract != "" {
		m = f.sp.Contract + ": " + m
	}
	f.res.Mismatches = append(f.res.Mismatches, m)
	f.fail(kind)
}

// fail records a kind of failure for the fix, with no mismatch of its own.
func (f *facts) fail(kind failure) {
	if !slices.Contains(f.fails, kind) {
		f.fails = append(f.fails, kind)
	}
}

// A rule judges one thing, adding what does not hold.
type rule func(f *facts)

// rules are the judge's rules, in the order their mismatches are listed.
var rules = []rule{
	cutByGuard,
	warmReused,
	callerOutcome,
	lateTimeout,
	hiddenReplay,
	closedConnection,
	idleTimeout,
	serverRequests,
	budgetEnds,
	writes,
	unread,
	keyKept,
	handlerEntries,
	cancelSeen,
	connsAccepted,
	connectionFate,
	recovered,
}

// judge combines the kit's report with the server's evidence; s.mu is held.
func judge(se *session, st *scenarioState, fs *faultserver.Server) *Result {
	sp := st.sp
	rep := st.report
	res := &Result{Name: sp.Name, Contract: sp.Contract, Proto: string(sp.Proto), Fault: sp.Fault, Expected: sp.caller}
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
	f := &facts{se: se, st: st, sp: sp, rep: rep, o: rep.Outcome, ev: evidence(se, st, fs), exp: sp.Expect, res: res}
	if alt, ok := sp.Expect.OrExpect(); ok && !st.cut && chooseAlternative(f.o, sp, f.ev, alt) {
		f.exp, f.alt = alt, true
	}
	res.Server, res.Caller, res.Attempts, res.ElapsedMS = f.ev, f.o, rep.Attempts, rep.ElapsedMS
	res.Class, res.Stage = classOf(f.o, f.exp)
	f.fate = fateOf(st, rep)
	res.Fate = f.fate.String()
	res.HiddenRetry = res.Attempts != nil && f.ev.Requests > int64(*res.Attempts)
	if f.o.Error == nil && f.ev.Requests == 0 && f.ev.Unread == 0 && sp.on <= onRawH2 && !st.cut {
		// No rule of a client's behaviour applies to a report of a
		// response the server never sent.
		res.Mismatches = []string{fmt.Sprintf("the kit reported a response (status %d), but the server read no request "+
			"for the faulted URL: the report is not what the client did", f.o.Status)}
		res.Fix = "check the kit: its client must send the scenario's request to its url, and report what that call got"
		return res
	}
	for _, r := range rules {
		r(f)
	}
	res.Pass = len(res.Mismatches) == 0
	if res.Pass && f.exp.Note != "" {
		res.Notes = append(res.Notes, f.exp.Note)
		if f.exp.Class != vocab.ClassOK && !timeoutClass(f.exp.Class) && f.exp.ServerRequests == 0 {
			res.Findings = append(res.Findings, Finding{Class: FindingLossToCaller, Text: f.exp.Note})
		}
	}
	if !res.Pass {
		res.Fix = fixFor(se.terms, sp, f.fails)
		if health := healthFix(se.terms, sp); sp.Policy.SendPingTimeout > 0 && slices.Contains(f.fails, failRecovery) && health != "" {
			// A connection that went dark kept taking requests, /ok's
			// too: what checks its health is the fix, in the client's
			// terms where known, not how the kit sends /ok.
			f.fails = slices.DeleteFunc(f.fails, func(k failure) bool { return k == failRecovery })
			res.Fix = health
			if rest := fixFor(se.terms, sp, f.fails); len(f.fails) > 0 {
				res.Fix += "; " + rest
			}
		}
	}
	return res
}

// chooseAlternative reports whether the caller's outcome o is the
// scenario's alternative alt rather than its expected one: o is of alt's
// kind and not of the expected one's, or of both and the server's count
// is alt's.
func chooseAlternative(o *Outcome, sp *spec, ev Evidence, alt audit.Expect) bool {
	isAlt := outcomeIs(o, callerOf(alt))
	isMain := outcomeIs(o, sp.caller)
	switch {
	case isAlt && !isMain:
		return true
	case isAlt && isMain:
		return ev.Requests == alt.ServerRequests && ev.Requests != sp.Expect.ServerRequests
	}
	return false
}

// outcomeIs reports whether o is of e's kind: e's status, or an error of
// e's kind.
func outcomeIs(o *Outcome, e Expectation) bool {
	if e.Error != "" {
		return o.Error != nil && o.Error.Kind == e.Error
	}
	return o.Error == nil && o.Status == e.Status
}

// cutByGuard: a call the server's guard cut was bounded by nothing of the
// client's; when the client made several attempts, each ended by itself,
// what was unbounded is their total.
func cutByGuard(f *facts) {
	if !f.st.cut {
		return
	}
	f.res.Unbounded = true
	f.ev.CutAfterMS = ms(f.st.cutAt.Sub(f.st.guardFrom))
	f.res.Server = f.ev
	switch {
	case f.ev.Requests > 1 && endedByClient(f.st) >= 1:
		f.add(failUnbounded, "unbounded: the call had not ended within the server's guard (%v): each of its %s ended, "+
			"the client closing its connection, but nothing bounded them all: the server cut the call",
			guardFor(f.sp), text.Plural(f.ev.Requests, "attempt"))
		f.fail(failBudget)
	case f.ev.Requests > 1:
		f.add(failUnbounded, "unbounded: the call had not ended within the server's guard (%v), after %s: the server cut it",
			guardFor(f.sp), text.Plural(f.ev.Requests, "request"))
	default:
		f.add(failUnbounded, "unbounded: no timeout fired at stage %s within the server's guard (%v): the server cut the call",
			stageOf(f.sp), guardFor(f.sp))
	}
}

// endedByClient counts the connections of the faulted requests, before
// the last, that the client closed itself: attempts its own bound ended.
func endedByClient(st *scenarioState) int {
	n := 0
	var seen []*connRec
	for _, r := range st.fault[:max(0, len(st.fault)-1)] {
		if !slices.Contains(seen, r.conn) {
			seen = append(seen, r.conn)
			if r.conn.closed && r.conn.closedBy == "client" {
				n++
			}
		}
	}
	return n
}

// warmReused: where the scenario's fault meets a kept-alive connection the
// warm-ups left, the faulted request must come on it; a client that opens
// a new connection instead did not reuse it, and the fault never met it.
func warmReused(f *facts) {
	st, sp := f.st, f.sp
	w := warmUps(sp)
	if w == 0 || !sp.Expect.OnWarmConn || len(st.fault) < w || f.res.Unbounded {
		return
	}
	warm := st.fault[w-1].conn
	// The request came on it: the server read it there, or closed it
	// there unread before it read one elsewhere (a later request, /ok's,
	// may meet the armed connection too).
	onWarm := len(st.fault) > w && st.fault[w].conn == warm
	unreadFirst := warm.unread > 0 && (len(st.fault) == w || warm.firstUnread.Before(st.fault[w].at))
	if !onWarm && !unreadFirst {
		f.fresh = true
		f.add(failFate, "the request came on a new connection, not on the kept-alive one the warm-up left: "+
			"the client did not reuse it, so the fault on reuse never met it")
	}
}

// callerOutcome: the caller got what the scenario expects (or its
// alternative).
func callerOutcome(f *facts) {
	if f.res.Unbounded || f.fresh {
		return
	}
	o, want := f.o, callerOf(f.exp)
	switch {
	case want.Error != "" && (o.Error == nil || o.Error.Kind != want.Error):
		f.add(failOutcome, "outcome: expected %s (%s), observed %s", expectText(f.sp.caller), f.exp.Class, callerText(o))
	case want.Error == "" && o.Error != nil:
		f.add(failOutcome, "outcome: expected %s, observed %s", expectText(f.sp.caller), callerText(o))
	case want.Error == "" && o.Status != want.Status:
		if f.sp.Contract != "" && o.Status == 200 && want.Status == 503 {
			f.add(failLastStatus, "status: expected the last 503, observed %d", o.Status)
		} else {
			f.add(failOutcome, "status: expected %d, observed %d", want.Status, o.Status)
		}
	}
	if f.sp.Contract != "" && want.Status == 503 && o.Error != nil {
		f.fail(failLastStatus)
	}
}

// lateTimeout: a timeout far later than the policy's bound is not that
// bound's.
func lateTimeout(f *facts) {
	o := f.o
	late := lateBound(f.sp)
	if f.res.Unbounded || f.sp.caller.Error != KindTimeout || o.Error == nil || o.Error.Kind != KindTimeout ||
		late <= 0 || f.sp.Contract != "" || time.Duration(f.rep.ElapsedMS*float64(time.Millisecond)) <= late {
		return
	}
	f.add(failUnbounded, "the timeout came after %.1fs, more than ten times the bound the policy sets: not that bound",
		f.rep.ElapsedMS/1000)
}

// hiddenReplay: a request the client sent again by itself is a finding,
// whether the scenario allows it or not; without an attempt count, a
// replay is noted.
func hiddenReplay(f *facts) {
	switch {
	case f.res.HiddenRetry:
		text := fmt.Sprintf("the server read %s for %s of the client's: the client sent the request again by itself",
			text.Plural(f.ev.Requests, "request"), text.Plural(int64(*f.res.Attempts), "attempt"))
		if f.exp.HiddenRetry && f.exp.Note != "" {
			text += " (" + f.exp.Note + ")"
		}
		f.res.Findings = append(f.res.Findings, Finding{Class: FindingHiddenRetry, Text: text})
	case f.res.Attempts == nil && f.ev.Requests > max(1, int64(f.exp.ClientAttempts)):
		f.res.Notes = append(f.res.Notes, fmt.Sprintf("replayed: the server saw %d requests; the kit gave no attempt count "+
			"(a hidden retry or the retry layer's)", f.ev.Requests))
	}
}

// closedConnection: where the server closed the warm-up's connection at
// the kit's asking, which connection the request came on says whether the
// client noticed the close, or wrote before it asked for its body.
func closedConnection(f *facts) {
	st, sp := f.st, f.sp
	if sp.Close == "" {
		return
	}
	if st.closed == nil {
		f.add(failOutcome, "the kit did not ask the server to close the connection (close_url)")
		return
	}
	onClosed, onNew := 0, 0
	for _, r := range st.fault[min(warmUps(sp), len(st.fault)):] {
		if r.conn == st.closed {
			onClosed++
		} else {
			onNew++
		}
	}
	how := map[string]string{"fin": "closed (FIN)", "rst": "reset (RST)", "idle": "closed (FIN) when idle",
		"limit": "closed after its last response"}[sp.Close]
	switch {
	case sp.Steps == audit.StepsWarmThenHeldBody && onClosed > 0:
		f.add(failOutcome, "the server read the POST on the connection before it %s it: the client wrote it before "+
			"asking for its body, so this scenario does not apply (a kit reports such a client not configurable)", how)
	case sp.Steps != audit.StepsWarmThenHeldBody:
		if st.clientClosed {
			f.res.Notes = append(f.res.Notes, "the client closed its side of the idle connection the server closed")
		} else {
			f.res.Notes = append(f.res.Notes, fmt.Sprintf("the client had not closed its side of the idle connection %v "+
				"after the server's FIN", clientCloseWait))
		}
		if onClosed > 0 {
			f.add(failStale, "the client sent the request on the idle connection the server had %s: %s on it, %d on a new one",
				how, text.Plural(int64(onClosed), "request"), onNew)
		}
	}
}

// idleTimeout: where the server closes idle connections by itself, the
// client's own idle timeout, as its kit declares it, must be shorter than
// the servers' keep-alive timeout ([ServerIdleTimeout]): a client that
// keeps one as long or longer sends a request as the server closes it.
func idleTimeout(f *facts) {
	if f.sp.Close != "idle" {
		return
	}
	server := f.se.srv.cfg.serverIdle
	d := f.se.client.IdleTimeoutMS
	switch {
	case d == nil:
		f.res.Notes = append(f.res.Notes, fmt.Sprintf("the kit did not say its client's idle timeout "+
			"(client.idle_timeout_ms): not judged against the servers' keep-alive timeout (%v)", server))
	case *d == 0:
		f.add(failIdle, "idle timeout: the client keeps an idle connection until the server closes it; the "+
			"servers' keep-alive timeout is %v: a request sent as the server closes one is lost", server)
	case time.Duration(*d*float64(time.Millisecond)) >= server:
		f.add(failIdle, "idle timeout: the client keeps an idle connection for %v, as long as the servers do, or "+
			"longer (%v): a request sent as the server closes one is lost", time.Duration(*d*float64(time.Millisecond)), server)
	}
}

// serverRequests: the server read as many requests as the scenario
// expects; more is a retry the client or its retry layer made.
func serverRequests(f *facts) {
	e, ev, sp := f.exp, f.ev, f.sp
	if ev.Requests == e.ServerRequests || e.BudgetEnds || f.fresh {
		return
	}
	// extra is what one too many requests is about: the client's own
	// replay when the retry layer made no more attempts than it should
	// (its fix is the client's, not the retry layer's), else the retry's.
	extra := func() failure {
		if f.res.HiddenRetry && *f.res.Attempts <= max(1, e.ClientAttempts) {
			return failHidden
		}
		return retriedWhat(sp, f.o)
	}
	switch {
	case sp.Contract != "" && ev.Requests > e.ServerRequests:
		f.add(extra(), "%s was retried: %s, contract %d", sp.Subject, text.Plural(ev.Requests, "request"), e.ServerRequests)
	case sp.Contract != "":
		f.add(failNotRetried, "%s was not retried as the contract says: %s, contract %d", sp.Subject,
			text.Plural(ev.Requests, "request"), e.ServerRequests)
	case sp.Steps == audit.StepsSecondCaller:
		f.add(failPool, "server-seen requests: expected 0 (the second caller waits for the one connection), observed %d", ev.Requests)
	default:
		f.add(extra(), "server-seen requests: expected %d, observed %d", e.ServerRequests, ev.Requests)
	}
	if f.res.HiddenRetry && !e.HiddenRetry {
		f.add(failHidden, "hidden retry: the server saw %d requests for %d client attempts", ev.Requests, *f.res.Attempts)
	}
}

// budgetEnds: where the total budget must end the call, it ends it after
// the requests it allows, with a timeout, not the last response.
func budgetEnds(f *facts) {
	e, ev := f.exp, f.ev
	if !e.BudgetEnds {
		return
	}
	switch {
	case ev.Requests > e.ServerRequests:
		f.add(failBudget, "%s was retried past the budget: %s, contract %d", f.sp.Subject, text.Plural(ev.Requests, "request"), e.ServerRequests)
	case ev.Requests < e.ServerRequests:
		f.add(failBudget, "%s was not retried as the contract says: %s, contract %d", f.sp.Subject,
			text.Plural(ev.Requests, "request"), e.ServerRequests)
	}
	if f.o.Error == nil && !f.res.Unbounded {
		f.fail(failBudget)
	}
}

// writes: the server committed as many writes as the scenario allows.
func writes(f *facts) {
	if w := f.exp.Writes; w != nil && f.ev.Writes != *w {
		kind := failPost
		if f.res.HiddenRetry {
			kind = failHidden // the client's own replay, not its retry layer's
		}
		f.add(kind, "the server committed %s, contract %d", text.Plural(f.ev.Writes, "write"), *w)
	}
}

// unread: the client sent as many requests on a connection the server was
// closing as the scenario expects.
func unread(f *facts) {
	if e := f.exp.Unread; e != nil && f.ev.Unread != *e && !f.fresh {
		f.add(failStale, "requests sent on a connection the server was closing, unread: expected %d, observed %d", *e, f.ev.Unread)
	}
}

// keyKept: an idempotency key the caller set is the same on every attempt.
func keyKept(f *facts) {
	r := f.sp.request
	if r.KeyPerAttempt != "" || r.Headers["Idempotency-Key"] == "" || len(f.ev.IdempotencyKeys) < 2 {
		return
	}
	keys := f.ev.IdempotencyKeys
	for _, k := range keys[1:] {
		if k != keys[0] {
			f.add(failKey, "the idempotency key changed between attempts: %s", strings.Join(keys, ", "))
			return
		}
	}
}

// handlerEntries: the server's handler was entered as often as expected.
func handlerEntries(f *facts) {
	if e := f.exp.HandlersEntered; e != nil && f.ev.HandlersEntered != *e {
		f.add(failCancel, "handler entries: expected %d, observed %d", *e, f.ev.HandlersEntered)
	}
}

// cancelSeen: the server saw the client go, where the scenario expects it.
func cancelSeen(f *facts) {
	if f.exp.CancelObserved && f.ev.CancelsObserved == 0 && !f.res.Unbounded && f.sp.on <= onRawH2 {
		f.add(failCancel, "the server did not observe the client's cancel: the connection stayed open")
	}
}

// connsAccepted: a listener below HTTP accepted as many connections as
// expected.
func connsAccepted(f *facts) {
	if e := f.exp.ConnsAccepted; e != nil && f.ev.ConnsAccepted != *e {
		f.add(failOutcome, "connections the server accepted: expected %d, observed %d", *e, f.ev.ConnsAccepted)
	}
}

// judgesFate reports whether the fate of sp's faulted connection is judged
// from outside the client: not a retry contract's (a retry layer may dial
// anew), not one that is net/http's own choice among correct ones, not one
// of a scenario with two correct outcomes (each takes its own path).
func judgesFate(sp *spec) bool {
	e := sp.Expect
	return sp.Contract == "" && !e.FateNetHTTP && e.Or == nil && e.Fate != nil
}

// connectionFate: the faulted connection became what the scenario
// expects, and the faulted request came on as many connections.
func connectionFate(f *facts) {
	if !judgesFate(f.sp) || f.res.Unbounded {
		return
	}
	want, got := f.exp.Fate, f.fate
	ok := want.ClosedBy == got.ClosedBy && want.Reason == got.Reason && want.Reused == got.Reused && want.None == got.None
	switch {
	case want.ClosedBy == vocab.ClosedByClient && (want.Reason == vocab.ReasonRequestError || want.Reason == vocab.ReasonPingTimeout):
		ok = got.ClosedBy == vocab.ClosedByClient // what makes the client close it is its own
	case want.Reason == vocab.ReasonServerGoAway, want.Reason == vocab.ReasonConnectionClose:
		// After a GOAWAY or a "Connection: close" either side may close
		// the connection first (a client that read the response may beat
		// the server's own close): the point is that it is not used again.
		ok = got.ClosedBy != "" && !got.Reused
	}
	if !ok {
		f.add(failFate, "connection fate: expected %s, observed %s", want, got)
	}
	if d := f.exp.Dials; d != nil && f.sp.on <= onRawH2 {
		if n := int64(faultConns(f.st)); n != *d {
			kind := failFate
			if f.res.HiddenRetry {
				kind = failHidden // the replay's new connection
			}
			f.add(kind, "connections for the faulted request: expected %d, observed %d", *d, n)
		}
	}
}

// recovered: /ok answered 200 through the same client, as the server saw.
func recovered(f *facts) {
	switch ok := f.rep.OK; {
	case ok == nil:
		f.add(failRecovery, "not recovered: the kit reported no /ok")
	case ok.Error != nil || ok.Status != 200:
		f.add(failRecovery, "not recovered: /ok got %s", callerText(ok))
	case len(f.st.ok) == 0:
		f.add(failRecovery, "not recovered: the kit reported /ok, but the server saw no request for it")
	}
}

// settled reports whether what the scenario expects of the client after
// its call (a connection it closes, a cancel the server observes) has
// happened; s.mu is held.
func settled(st *scenarioState, fs *faultserver.Server) bool {
	e := st.sp.Expect
	if st.report == nil || st.report.Outcome == nil || st.cut {
		return true
	}
	if e.CancelObserved && st.sp.on <= onRawH2 && fs.Counters(st.faultPath).CancelsObserved == 0 {
		return false
	}
	if f := e.Fate; f != nil && f.ClosedBy != "" && len(st.fault) > 0 {
		// The fate is reported even where it is not judged (a client may
		// drain a body or close it): a connection the client closed
		// before its report, whose close the server records a little
		// after, must not read "open". One /ok came on is not waited for.
		c := st.fault[len(st.fault)-1].conn
		if judgesFate(st.sp) || len(st.ok) == 0 || st.ok[0].conn != c {
			return c.closed
		}
	}
	if o := st.report.Outcome; o.Error != nil && o.Error.Kind == KindConnection && st.sp.Proto == audit.HTTP1 && len(st.fault) > 0 {
		// An HTTP/1 connection whose loss the caller got is closed: the
		// server's record of the close may come a little after the
		// kit's report, and the fate reported must not depend on it.
		return st.fault[len(st.fault)-1].conn.closed
	}
	return true
}

// classPool is the class of a call the client's pool refused (its acquire
// timeout, Reactor Netty's pendingAcquireTimeout), said as the kit's kind:
// not a deadline of the caller's, a refusal of the pool's.
const classPool vocab.Class = "pool"

// classOf states the caller's outcome in the audit's vocabulary, made
// precise by the expectation: a timeout where the scenario expects one is
// the bound it expects (a response-header-timeout at await-headers), a
// lost connection the class of the connection's loss it expects.
func classOf(o *Outcome, e audit.Expect) (vocab.Class, vocab.Stage) {
	alt := e.Or
	switch {
	case o.Error == nil:
		return vocab.ClassOK, ""
	case o.Error.Kind == KindPool:
		return classPool, vocab.StagePoolWait
	case o.Error.Kind == KindCanceled:
		return vocab.ClassCanceled, e.Stage
	case o.Error.Kind == KindTimeout && timeoutClass(e.Class) && e.Stage != vocab.StagePoolWait:
		return e.Class, e.Stage
	case o.Error.Kind == KindTimeout:
		return vocab.ClassTimeout, e.Stage
	case o.Error.Kind == KindConnection && connectionClass(e.Class):
		return e.Class, e.Stage
	case o.Error.Kind == KindConnection && alt != nil && connectionClass(alt.Class):
		return alt.Class, alt.Stage
	}
	return vocab.ClassError, e.Stage
}

// connectionClass reports whether c is a class of a lost or refused
// connection.
func connectionClass(c vocab.Class) bool {
	return c != vocab.ClassOK && c != vocab.ClassCanceled && !timeoutClass(c) && c != vocab.ClassError
}

// expectText says an expectation of the caller's.
func expectText(e Expectation) string {
	s := fmt.Sprintf("status %d", e.Status)
	if e.Error != "" {
		s = e.Error + " error"
	}
	if e.Or != nil {
		s += " or " + expectText(*e.Or)
	}
	return s
}

// callerText says what the caller got.
func callerText(o *Outcome) string {
	if o.Error != nil {
		s := o.Error.Kind + " error"
		if o.Error.Message != "" {
			s += " (" + text.FirstLine(o.Error.Message) + ")"
		}
		return s
	}
	return fmt.Sprintf("status %d", o.Status)
}

// retriedWhat says what kind of retry one too many requests is.
func retriedWhat(sp *spec, o *Outcome) failure {
	switch {
	case sp.request.Method == "POST":
		return failPost
	case sp.caller.Error != "" || sp.caller.Or != nil:
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
	if sp.Expect.Stage != "" {
		return sp.Expect.Stage
	}
	if sp.Steps == audit.StepsSecondCaller {
		return vocab.StagePoolWait
	}
	return vocab.StageAwaitHeaders
}

// warmUps is the number of warm-up requests of sp that come on the faulted
// URL.
func warmUps(sp *spec) int {
	if !sp.Steps.Warmed() || sp.WarmAside {
		return 0
	}
	return max(1, sp.Warm)
}
