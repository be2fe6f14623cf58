package probe

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// The finding ids (see [Finding]).
const (
	idRequestErrors               = "request-errors"
	idErrorResponses              = "error-responses"
	idNoKeepAlive                 = "no-keep-alive"
	idServerClosesEveryN          = "server-closes-every-n"
	idServerIdleShorterThanClient = "server-idle-shorter-than-client"
	idH2NotOffered                = "h2-not-offered"
	idHiddenRetries               = "hidden-retries"
	idSlowNewConnection           = "slow-new-connection"
	idTLSNotResumed               = "tls-not-resumed"
	idDeadlineReached             = "deadline-reached"
)

// closesEveryNInfo is the requests-per-connection limit from which a
// server that closes every N requests is only worth knowing about.
const closesEveryNInfo = 100

// A rule draws one finding from the facts of a finished probe, or none.
type rule func(f *facts) (Finding, bool)

// rules are the findings' rules, in the order their findings are listed
// before [sortFindings] puts the most severe first.
var rules = []rule{
	requestErrors,
	errorResponses,
	noKeepAlive,
	serverClosesEveryN,
	serverIdleShorterThanClient,
	h2NotOffered,
	hiddenRetries,
	slowNewConnection,
	tlsNotResumed,
	deadlineReached,
}

// findings applies the rules to a finished report, in order.
func findings(rep *Report, cfg *config, ev *evidence, https bool) []Finding {
	f := newFacts(rep, cfg, ev, https)
	fs := []Finding{}
	for _, r := range rules {
		if fd, ok := r(f); ok {
			fs = append(fs, fd)
		}
	}
	return fs
}

// facts are what the rules judge: the report, the probe's configuration
// and the timelines' evidence, with what several rules derive from them.
type facts struct {
	rep   *Report
	cfg   *config
	ev    *evidence
	https bool
	// ok counts the main run's requests that got a response.
	ok int
	// served are the connections that answered at least one request;
	// judged those whose close may say something of the server's
	// keep-alive limits: not those it closed after an error response,
	// which a server may do whatever its limits.
	served, judged []Connection
	// maxReqs and idle are the discoveries' results, nil if not run.
	maxReqs *MaxRequestsResult
	idle    *IdleTimeoutResult
	// noKeepAlive is set when the server keeps no connection alive: the
	// main run saw every judged connection closed by the server after one
	// response, or discovery found a limit of one.
	noKeepAlive bool
	// everyN are the connections the server closed after N ≥ 2 requests
	// (none when it keeps no connection alive); announced is set when it
	// said so on each.
	everyN    []Connection
	announced bool
}

func newFacts(rep *Report, cfg *config, ev *evidence, https bool) *facts {
	f := &facts{rep: rep, cfg: cfg, ev: ev, https: https, ok: rep.Outcomes[vocab.ClassOK]}
	f.served = servedConns(rep)
	f.judged = slices.DeleteFunc(slices.Clone(f.served), closedAfterError)
	if d := rep.Discovery; d != nil {
		f.maxReqs, f.idle = d.MaxRequests, d.IdleTimeout
	}
	f.noKeepAlive = f.oneResponseEach() || (f.maxReqs != nil && f.maxReqs.Found && f.maxReqs.Limit == 1)
	switch {
	case f.noKeepAlive:
	case f.maxReqs != nil && f.maxReqs.Found && f.maxReqs.Limit >= 2:
		// The finding gives discovery's limit; the main run's closes
		// without notice at one count are still closes after N, not
		// for idleness.
		f.everyN = silentAtOneCount(f.judged)
	default:
		f.everyN, f.announced = announcedCloses(f.judged), true
		if len(f.everyN) == 0 {
			f.everyN, f.announced = silentAtOneCount(f.judged), false
		}
	}
	return f
}

// oneResponseEach reports whether the main run saw every judged
// connection answer one request and the server close it after that
// response.
func (f *facts) oneResponseEach() bool {
	return len(f.judged) > 0 && f.ok > 0 && allOneAndServerClosed(f.judged)
}

// found returns a finding.
func found(id string, sev Severity, format string, args ...any) (Finding, bool) {
	return Finding{ID: id, Severity: sev, Message: fmt.Sprintf(format, args...)}, true
}

// requestErrors: a request failed, other than by the probe's own deadline
// or an interruption.
func requestErrors(f *facts) (Finding, bool) {
	rep := f.rep
	ended := 0
	for _, n := range rep.Outcomes {
		ended += n
	}
	failed := ended - f.ok - rep.Cut
	if failed <= 0 {
		return Finding{}, false
	}
	msg := fmt.Sprintf("%d of %d requests failed: %s", failed, rep.Requests, failureSummary(rep.Failures))
	if rep.Cut > 0 {
		msg += fmt.Sprintf(" (%d more cut short by the deadline)", rep.Cut)
	}
	return found(idRequestErrors, severityError, "%s", msg)
}

// errorResponses: every response was an error; the server's closes after
// them are not taken for keep-alive limits.
func errorResponses(f *facts) (Finding, bool) {
	statuses := f.rep.Statuses
	errs := errorStatuses(statuses)
	if f.ok == 0 || len(errs) != len(statuses) {
		return Finding{}, false
	}
	msg := fmt.Sprintf("every response was an error (%s)", statusList(statuses, errs))
	if n := len(f.served) - len(f.judged); n > 0 {
		msg += fmt.Sprintf("; the server closed %d connection(s) after an error response (Connection: close), which says nothing of its keep-alive limits", n)
	}
	return found(idErrorResponses, severityWarn, "%s: check the URL, method and headers", msg)
}

// noKeepAlive: every connection that answered a request answered one and
// the server closed it after that response; or discovery found that it
// closes a connection after its first response.
func noKeepAlive(f *facts) (Finding, bool) {
	rep := f.rep
	switch {
	case f.oneResponseEach():
		return found(idNoKeepAlive, severityWarn,
			"the server closed every connection after one response (%s): %d dials for %d requests; with keep-alive %d would do",
			reasonList(f.judged), rep.Dials, rep.Requests, rep.PerfectDials)
	case f.noKeepAlive:
		return found(idNoKeepAlive, severityWarn, "the server closed the connection after its first response (%s)", howText(f.maxReqs.How))
	}
	return Finding{}, false
}

// serverClosesEveryN: discovery found the server's limit of N ≥ 2
// requests per connection; or, in the main run, the server closed
// connections after N ≥ 2 requests, saying so (Connection: close, or
// GOAWAY) or, without notice, at the same count on two connections or
// more. A connection counts the requests answered on it.
func serverClosesEveryN(f *facts) (Finding, bool) {
	if f.noKeepAlive {
		return Finding{}, false
	}
	rep := f.rep
	if d := f.maxReqs; d != nil && d.Found && d.Limit >= 2 {
		sev := severityWarn
		if d.Limit >= closesEveryNInfo {
			sev = severityInfo
		}
		msg := fmt.Sprintf("the server closes each connection after %d requests (%s)", d.Limit, howText(d.How))
		if d.ErrorResponses > 0 {
			msg += fmt.Sprintf(" (measured on responses of which %d were errors)", d.ErrorResponses)
		}
		if !announced(d.How) {
			msg += ": it does so without notice, so the next request on the connection fails or is retried by the Transport"
		}
		if rep.Dials > int64(rep.PerfectDials) {
			msg += fmt.Sprintf("; the main run dialed %d times for %d requests, %d with perfect keep-alive", rep.Dials, rep.Requests, rep.PerfectDials)
		}
		return found(idServerClosesEveryN, sev, "%s", msg)
	}
	if len(f.everyN) == 0 {
		return Finding{}, false
	}
	lo, hi := f.everyN[0].Responses, f.everyN[0].Responses
	for _, c := range f.everyN {
		lo, hi = min(lo, c.Responses), max(hi, c.Responses)
	}
	sev := severityWarn
	if lo >= closesEveryNInfo {
		sev = severityInfo
	}
	every := fmt.Sprintf("%d", lo)
	if hi != lo {
		every = fmt.Sprintf("%d to %d", lo, hi)
	}
	msg := fmt.Sprintf("the server closed %d connection(s) after %s requests each (%s)", len(f.everyN), every, reasonList(f.everyN))
	if !f.announced {
		msg += ", without notice, so the next request on such a connection fails or is retried by the Transport"
	}
	return found(idServerClosesEveryN, sev, "%s: %d dials for %d requests, %d with perfect keep-alive",
		msg, rep.Dials, rep.Requests, rep.PerfectDials)
}

// serverIdleShorterThanClient: discovery found the server's idle timeout
// below the client's; or the server closed idle connections the client
// would have kept, other than those taken for closes after N requests.
func serverIdleShorterThanClient(f *facts) (Finding, bool) {
	clientIdle := f.cfg.clientIdle
	if i := f.idle; i != nil && i.Found && i.Closed < clientIdle {
		return found(idServerIdleShorterThanClient, severityWarn,
			"the server's idle timeout is %s; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry): keep the client's idle timeout below %s",
			bracket(i.Survived, i.Closed), human(clientIdle), human(max(i.Survived, i.Closed/2)))
	}
	closedAtN := make(map[uint64]bool, len(f.everyN))
	for _, c := range f.everyN {
		closedAtN[c.ID] = true
	}
	var idleClosed []time.Duration
	for _, c := range f.served {
		if c.CloseReason == vocab.ReasonServerClosedIdle && !closedAtN[c.ID] {
			idleClosed = append(idleClosed, c.IdleBeforeClose)
		}
	}
	if len(idleClosed) == 0 {
		return Finding{}, false
	}
	slices.Sort(idleClosed)
	return found(idServerIdleShorterThanClient, severityWarn,
		"the server closed %d idle connection(s), after %s idle; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry)",
		len(idleClosed), spread(idleClosed), human(clientIdle))
}

// h2NotOffered: over TLS, with HTTP/2 allowed, no connection negotiated
// it.
func h2NotOffered(f *facts) (Finding, bool) {
	rep := f.rep
	if !f.https || f.cfg.http1 || rep.TLS == nil || len(f.served) == 0 || rep.Protocols["h2"] > 0 {
		return Finding{}, false
	}
	sev := severityInfo
	if f.cfg.requireHTTP2 {
		sev = severityError
	}
	return found(idH2NotOffered, sev, "the server did not select HTTP/2 over TLS (ALPN: %s): each concurrent request needs its own connection", orNone(rep.TLS.ALPN))
}

// hiddenRetries: the Transport retried requests by itself.
func hiddenRetries(f *facts) (Finding, bool) {
	if f.rep.HiddenRetries <= 0 {
		return Finding{}, false
	}
	return found(idHiddenRetries, severityWarn,
		"the Transport sent %d request(s) again on another connection by itself (%d extra attempt(s)), after the connection it had sent them on failed before any response: the server may or may not have processed the first attempt, so a request that is not idempotent risks running twice",
		f.rep.HiddenRetries, f.rep.ExtraAttempts)
}

// slowNewConnection: setting up a connection takes more than half of the
// per-request budget, or a request on a new connection ran out of it.
func slowNewConnection(f *facts) (Finding, bool) {
	timeout := f.cfg.timeout
	var slow []time.Duration
	for _, d := range f.ev.setups {
		if d > timeout/2 {
			slow = append(slow, d)
		}
	}
	// A timeout in a setup stage always counts; one later on a new
	// connection only when requests on reused connections made it in
	// time, so that the cost of the new connection is what tipped it.
	timeouts := map[httptrace.Stage]int{}
	timedOut := 0
	for st, n := range f.ev.newConnTimeouts {
		if setupStage(st) || f.rep.Stages.Reused.Count > 0 {
			timeouts[st] += n
			timedOut += n
		}
	}
	if len(slow) == 0 && timedOut == 0 {
		return Finding{}, false
	}
	var parts []string
	if timedOut > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) ran out of the %s timeout while setting up or on a new connection (%s)",
			timedOut, human(timeout), stageCounts(timeouts)))
	}
	if len(slow) > 0 {
		slices.Sort(slow)
		parts = append(parts, fmt.Sprintf("%d connection setup(s) took more than half of it (up to %s)", len(slow), human(slow[len(slow)-1])))
	}
	return found(idSlowNewConnection, severityWarn, "%s: reuse hides it until a new connection is needed", strings.Join(parts, "; "))
}

// tlsNotResumed: connections dialed after a handshake had finished could
// have resumed its session, and none did.
func tlsNotResumed(f *facts) (Finding, bool) {
	t := f.rep.TLS
	if t == nil || t.Resumable <= 0 || t.Resumed != 0 {
		return Finding{}, false
	}
	return found(idTLSNotResumed, severityInfo,
		"none of the %d TLS connection(s) that could have resumed a session did: each new connection pays a full handshake", t.Resumable)
}

// deadlineReached: the probe's deadline cut it short.
func deadlineReached(f *facts) (Finding, bool) {
	rep := f.rep
	if !rep.DeadlineReached {
		return Finding{}, false
	}
	return found(idDeadlineReached, severityWarn, "the %s deadline stopped the probe: %d of %d requests sent, %d cut short%s",
		human(f.cfg.deadline), rep.Requests, rep.Requested, rep.Cut, discoveryCut(rep))
}

func setupStage(st httptrace.Stage) bool {
	return st == vocab.StageDNS || st == vocab.StageConnect || st == vocab.StageTLS
}

// servedConns returns the connections that answered at least one
// request.
func servedConns(rep *Report) []Connection {
	var out []Connection
	for _, c := range rep.Connections {
		if c.Responses > 0 {
			out = append(out, c)
		}
	}
	return out
}

// closedAfterError reports whether the server announced the close of c on
// an error response (status 400 or more).
func closedAfterError(c Connection) bool {
	return c.CloseStatus >= 400
}

// announcedCloses returns the connections among cs the server closed, saying
// so, after N ≥ 2 requests.
func announcedCloses(cs []Connection) []Connection {
	var out []Connection
	for _, c := range cs {
		if c.ClosedBy == vocab.ClosedByServer && announced(string(c.CloseReason)) && c.Responses >= 2 {
			out = append(out, c)
		}
	}
	return out
}

// silentAtOneCount returns the connections among cs the server closed
// without notice, right after a response or during the next request,
// when there are two or more and every one of them had answered the same
// number N ≥ 2 of requests: the pattern of a server that closes after N
// requests without saying so, not that of an idle timeout.
func silentAtOneCount(cs []Connection) []Connection {
	var out []Connection
	for _, c := range cs {
		if c.ClosedBy != vocab.ClosedByServer {
			continue
		}
		switch c.CloseReason {
		case vocab.ReasonServerClosedIdle, vocab.ReasonServerEOF, vocab.ReasonServerReset:
		default:
			continue
		}
		if len(out) > 0 && c.Responses != out[0].Responses {
			return nil
		}
		out = append(out, c)
	}
	if len(out) < 2 || out[0].Responses < 2 {
		return nil
	}
	return out
}

// errorStatuses returns the error statuses (400 or more) among statuses,
// in order.
func errorStatuses(statuses map[int]int) []int {
	var out []int
	for code := range statuses {
		if code >= 400 {
			out = append(out, code)
		}
	}
	slices.Sort(out)
	return out
}

// statusList says the counts of the given statuses: "431 ×3, 503 ×1".
func statusList(statuses map[int]int, codes []int) string {
	parts := make([]string, 0, len(codes))
	for _, code := range codes {
		parts = append(parts, fmt.Sprintf("%d ×%d", code, statuses[code]))
	}
	return strings.Join(parts, ", ")
}

// announced reports whether a close reason is one the server announced.
func announced(reason string) bool {
	switch pool.CloseReason(reason) {
	case vocab.ReasonConnectionClose, vocab.ReasonHTTP10, vocab.ReasonServerGoAway:
		return true
	}
	return false
}

// allOneAndServerClosed reports whether every connection answered one
// request and was closed by the server after it, not for being idle.
func allOneAndServerClosed(cs []Connection) bool {
	for _, c := range cs {
		if c.Responses != 1 || c.ClosedBy != vocab.ClosedByServer {
			return false
		}
		switch c.CloseReason {
		case vocab.ReasonConnectionClose, vocab.ReasonHTTP10, vocab.ReasonServerGoAway, vocab.ReasonServerEOF, vocab.ReasonServerReset:
		default:
			return false
		}
	}
	return true
}

// reasonList names the server close reasons among cs, most frequent first.
func reasonList(cs []Connection) string {
	counts := map[pool.CloseReason]int{}
	var order []pool.CloseReason
	for _, c := range cs {
		if c.ClosedBy != vocab.ClosedByServer {
			continue
		}
		if counts[c.CloseReason] == 0 {
			order = append(order, c.CloseReason)
		}
		counts[c.CloseReason]++
	}
	slices.SortStableFunc(order, func(a, b pool.CloseReason) int { return counts[b] - counts[a] })
	parts := make([]string, 0, len(order))
	for _, r := range order {
		parts = append(parts, howText(string(r)))
	}
	return strings.Join(parts, ", ")
}

// howText says a close reason in words.
func howText(reason string) string {
	switch pool.CloseReason(reason) {
	case vocab.ReasonConnectionClose:
		return "Connection: close"
	case vocab.ReasonHTTP10:
		return "HTTP/1.0 without keep-alive"
	case vocab.ReasonServerGoAway:
		return "HTTP/2 GOAWAY"
	case vocab.ReasonServerEOF:
		return "closed during a request"
	case vocab.ReasonServerReset:
		return "reset"
	case vocab.ReasonServerClosedIdle:
		return "closed while idle"
	}
	return reason
}

func failureSummary(fs []Failure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s @%s ×%d", f.Class, f.Stage, f.Count))
	}
	s := strings.Join(parts, ", ")
	if len(fs) > 0 && fs[0].Error != "" {
		s += "; first: " + fs[0].Error
	}
	return s
}

func stageCounts(m map[httptrace.Stage]int) string {
	stages := make([]string, 0, len(m))
	for st := range m {
		stages = append(stages, string(st))
	}
	slices.Sort(stages)
	parts := make([]string, 0, len(stages))
	for _, st := range stages {
		parts = append(parts, fmt.Sprintf("%s ×%d", st, m[httptrace.Stage(st)]))
	}
	return strings.Join(parts, ", ")
}

func discoveryCut(rep *Report) string {
	if rep.Discovery == nil {
		return ""
	}
	var cut []string
	if m := rep.Discovery.MaxRequests; m != nil && !m.Found && m.Error != "" {
		cut = append(cut, "find-max-requests")
	}
	if i := rep.Discovery.IdleTimeout; i != nil && !i.Complete {
		cut = append(cut, "find-idle-timeout")
	}
	if len(cut) == 0 {
		return ""
	}
	return "; incomplete: " + strings.Join(cut, ", ")
}

// bracket says where an idle timeout lies.
func bracket(survived, closed time.Duration) string {
	if survived == 0 {
		return "less than " + human(closed)
	}
	return fmt.Sprintf("between %s and %s", human(survived), human(closed))
}

// spread says a sorted list of durations as a range.
func spread(ds []time.Duration) string {
	if ds[0] == ds[len(ds)-1] {
		return human(ds[0])
	}
	return fmt.Sprintf("%s to %s", human(ds[0]), human(ds[len(ds)-1]))
}

// human rounds d for reading.
func human(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
