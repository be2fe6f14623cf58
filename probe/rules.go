package probe

import (
	"fmt"
	"maps"
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
	idProtocolErrors              = "protocol-errors"
	idH2UnusedDials               = "h2-unused-dials"
	idKeepAliveHeaderDiffers      = "keep-alive-header-differs"
)

// immediateClose is the idle time under which a server's close of an idle
// connection right after its response is taken for no keep-alive, not an
// idle timeout.
const immediateClose = 10 * time.Millisecond

// closesEveryNInfo is the requests-per-connection limit from which a
// server that closes every N requests is only worth knowing about.
const closesEveryNInfo = 100

// A rule draws one finding from the facts of a finished probe, or none.
type rule func(f *facts) (Finding, bool)

// rules are the findings' rules, in the order their findings are listed
// before [sortFindings] puts the most severe first.
var rules = []rule{
	requestErrors,
	protocolErrors,
	errorResponses,
	noKeepAlive,
	serverClosesEveryN,
	serverIdleShorterThanClient,
	h2NotOffered,
	hiddenRetries,
	h2UnusedDials,
	keepAliveHeaderDiffers,
	slowNewConnection,
	tlsNotResumed,
	deadlineReached,
}

// findings applies the rules to a finished report, in order.
func findings(rep *Result, cfg *config, ev *evidence, https bool) []Finding {
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
	rep   *Result
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
	// idleClosed are how long the served connections the server closed
	// while idle had been idle (not those taken for closes after N
	// requests, nor immediate closes).
	idleClosed []time.Duration
}

func newFacts(rep *Result, cfg *config, ev *evidence, https bool) *facts {
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
	closedAtN := make(map[uint64]bool, len(f.everyN))
	for _, c := range f.everyN {
		closedAtN[c.ID] = true
	}
	for _, c := range f.served {
		if c.CloseReason == vocab.ReasonServerClosedIdle && !closedAtN[c.ID] && !f.noKeepAlive {
			f.idleClosed = append(f.idleClosed, c.IdleBeforeClose)
		}
	}
	return f
}

// oneResponseEach reports whether the main run saw every judged
// connection answer one request and the server close it after that
// response.
func (f *facts) oneResponseEach() bool {
	return len(f.judged) > 0 && f.ok > 0 && allOneAndServerClosed(f.judged, f.cfg.gap)
}

// found returns a finding.
func found(id string, sev Severity, format string, args ...any) (Finding, bool) {
	return Finding{ID: id, Severity: sev, Message: fmt.Sprintf(format, args...)}, true
}

// requestErrors: a request failed, other than by the probe's own deadline
// or an interruption; a response body that did not end within the probe's
// bounds (MaxBody, Timeout) or ended too soon is said apart, with its fix.
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
	if fix := bodiesText(f.ev.bodies, f.cfg); fix != "" {
		msg += "; " + fix
	}
	return found(idRequestErrors, severityError, "%s", msg)
}

// bodiesText says which response bodies did not end well, and what fixes
// each, or "".
func bodiesText(b bodyFailures, cfg *config) string {
	var parts []string
	if b.overMax > 0 {
		parts = append(parts, fmt.Sprintf("the body of %d response(s) went on past MaxBody (%d bytes), where the probe stopped reading: raise MaxBody if the bodies are that long; one that never ends is the server's to end",
			b.overMax, cfg.maxBody))
	}
	if b.timedOut > 0 {
		parts = append(parts, fmt.Sprintf("the body of %d response(s) did not end within the %s Timeout: the server sent it too slowly or never finished it (a Content-Length it does not reach, a chunked body without its last chunk); raise Timeout if the bodies are that slow, else fix the server",
			b.timedOut, human(cfg.timeout)))
	}
	if b.truncated > 0 {
		parts = append(parts, fmt.Sprintf("the body of %d response(s) ended before its declared length (the server closed the connection mid-body): fix the server",
			b.truncated))
	}
	return strings.Join(parts, "; ")
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
			reasonList(f.judged, f.cfg.gap), rep.Dials, rep.Requests, rep.PerfectDials)
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
	msg := fmt.Sprintf("the server closed %d connection(s) after %s requests each (%s)", len(f.everyN), every, reasonList(f.everyN, f.cfg.gap))
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
	if f.noKeepAlive {
		return Finding{}, false
	}
	clientIdle := f.cfg.clientIdle
	adv := f.rep.KeepAlive.Timeout
	said := ""
	if adv > 0 {
		said = fmt.Sprintf("; it advertises Keep-Alive: timeout=%d", int(adv/time.Second))
	}
	// The advice takes the smaller of what the server does (bound, a
	// client idle timeout safely below it; 0 if unknown) and what it says
	// (with room for a request to reach it).
	advise := func(bound time.Duration) string {
		if adv > 0 && (bound == 0 || adv-adv/4 < bound) {
			return human(adv - adv/4)
		}
		return human(bound)
	}
	if i := f.idle; i != nil && i.Found && (i.Closed < clientIdle || (adv > 0 && adv < clientIdle)) {
		return found(idServerIdleShorterThanClient, severityWarn,
			"the server's idle timeout is %s%s; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry): keep the client's idle timeout below %s",
			bracket(i.Survived, i.Closed), said, human(clientIdle), advise(max(i.Survived, i.Closed/2)))
	}
	if len(f.idleClosed) == 0 {
		if adv > 0 && adv < clientIdle {
			return found(idServerIdleShorterThanClient, severityWarn,
				"the server advertises an idle timeout of %s (Keep-Alive: %s); the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry): keep the client's idle timeout below %s",
				human(adv), f.rep.KeepAlive.Header, human(clientIdle), advise(0))
		}
		return Finding{}, false
	}
	idle := slices.Sorted(slices.Values(f.idleClosed))
	return found(idServerIdleShorterThanClient, severityWarn,
		"the server closed %d idle connection(s), after %s idle%s; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry): keep the client's idle timeout below %s",
		len(idle), spread(idle), said, human(clientIdle), advise(idle[0]-idle[0]/4))
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

// hiddenRetries: the Transport sent requests again by itself after
// writing them to a live connection that then failed: the server may have
// processed them twice. Those the evidence shows the server did not
// process (Result.HiddenRetriesWhy) are no finding.
func hiddenRetries(f *facts) (Finding, bool) {
	rep := f.rep
	n := rep.HiddenRetriesPossiblyProcessed
	if n <= 0 {
		return Finding{}, false
	}
	sev := severityWarn
	risk := "a request that is not idempotent risks running twice"
	if !idempotent(rep.Method) {
		sev = severityError
		risk = fmt.Sprintf("%s is not idempotent: it may have run twice", rep.Method)
	}
	msg := fmt.Sprintf("the Transport sent %d request(s) again on another connection by itself after writing them to a connection that then failed before any response: the server may have processed the first attempt, so %s",
		n, risk)
	if m := rep.HiddenRetriesNotProcessed; m > 0 {
		msg += fmt.Sprintf(" (%d more were sent again that the server certainly had not processed: %s)", m, whyList(rep.HiddenRetriesWhy))
	}
	return found(idHiddenRetries, sev, "%s", msg)
}

// idempotent reports whether method is idempotent (RFC 9110, 9.2.2).
func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// whyList says the counts of not-processed retries by reason.
func whyList(why map[string]int) string {
	keys := slices.Sorted(maps.Keys(why))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, why[k]))
	}
	return strings.Join(parts, ", ")
}

// protocolErrors: the client gave connections up over the server's
// protocol violations.
func protocolErrors(f *facts) (Finding, bool) {
	rep := f.rep
	n := rep.ClosedBy[vocab.ReasonProtocolError]
	if n <= 0 || f.ok == 0 {
		// With no response at all, request-errors says it.
		return Finding{}, false
	}
	detail := ""
	for _, c := range rep.Connections {
		if c.CloseReason == vocab.ReasonProtocolError {
			if detail = c.CloseDetail; detail == "" {
				detail = f.firstProtocolFailure()
			}
			break
		}
	}
	every := ""
	if served := int64(len(f.served)); served > 0 && n >= served {
		every = ", every one that answered"
	}
	msg := fmt.Sprintf("the client gave up %d connection(s) over the server's protocol violations%s", n, every)
	if detail != "" {
		msg += " (" + detail + ")"
	}
	return found(idProtocolErrors, severityError, "%s: %d dials for %d requests, %d with perfect keep-alive; fix the server",
		msg, rep.Dials, rep.Requests, rep.PerfectDials)
}

// firstProtocolFailure returns the first failure of class protocol, said
// briefly, or "".
func (f *facts) firstProtocolFailure() string {
	for _, fl := range f.rep.Failures {
		if fl.Class == vocab.ClassProtocol {
			return fl.Error
		}
	}
	return ""
}

// h2UnusedDials: the Transport dialed HTTP/2 connections it never used:
// closed once their handshake finished ("h2-unused"), abandoned during it,
// or kept beside the one it used.
func h2UnusedDials(f *facts) (Finding, bool) {
	rep := f.rep
	if rep.Protocols["h2"] == 0 {
		return Finding{}, false
	}
	unused := rep.ClosedBy[vocab.ReasonH2Unused]
	n := max(int64(f.ev.idleDials), unused+rep.DialsAbandoned)
	if n <= 0 {
		return Finding{}, false
	}
	how := fmt.Sprintf("%d closed unused", unused)
	if rep.DialsAbandoned > 0 {
		how += fmt.Sprintf(", %d abandoned during their handshake", rep.DialsAbandoned)
	}
	cost := ""
	if f.ev.unusedListed > 0 {
		each := f.ev.unusedSetup / time.Duration(f.ev.unusedListed)
		cost = fmt.Sprintf("; setting one up took about %s", human(each))
	}
	return found(idH2UnusedDials, severityWarn,
		"the Transport dialed %d HTTP/2 connection(s) it never used (%s)%s: a TCP connect and a TLS handshake each, on both sides, for nothing; requests that found no connection to the host open dialed their own, and net/http keeps one HTTP/2 connection per host: set MaxConnsPerHost to 1 (the requests then wait for the one connection and share it), or send one request first and start the concurrent ones once it has its connection",
		n, how, cost)
}

// keepAliveHeaderDiffers: the server's Keep-Alive header promises more
// than it keeps: it closes idle connections sooner than its timeout, or
// connections after fewer requests than its max.
func keepAliveHeaderDiffers(f *facts) (Finding, bool) {
	ka := &f.rep.KeepAlive
	if ka.Responses == 0 || f.noKeepAlive {
		return Finding{}, false
	}
	var parts []string
	if ka.Timeout > 0 {
		if idle := f.observedIdle(); idle > 0 && idle < ka.Timeout-ka.Timeout/8 {
			parts = append(parts, fmt.Sprintf("it closed idle connections after %s, sooner than its timeout of %s", human(idle), human(ka.Timeout)))
		}
	}
	if ka.Max > 0 {
		if limit := f.observedLimit(); limit > 0 && limit < ka.Max {
			parts = append(parts, fmt.Sprintf("it closed connections after %d requests, fewer than its max of %d", limit, ka.Max))
		}
	}
	if len(parts) == 0 {
		return Finding{}, false
	}
	return found(idKeepAliveHeaderDiffers, severityWarn,
		"the server's Keep-Alive header (%s) promises more than it keeps: %s; a client that trusts the header sends requests on connections the server is closing",
		ka.Header, strings.Join(parts, "; "))
}

// observedIdle returns the shortest idle time after which the server was
// seen to close a connection (discovery's bound, or the main run's idle
// closes), 0 if it was not.
func (f *facts) observedIdle() time.Duration {
	var t time.Duration
	if i := f.idle; i != nil && i.Found {
		t = i.Closed
	}
	for _, d := range f.idleClosed {
		if t == 0 || d < t {
			t = d
		}
	}
	return t
}

// observedLimit returns the requests-per-connection limit the server was
// seen to keep (discovery's, or the least of the main run's closes after
// N requests), 0 if none.
func (f *facts) observedLimit() int {
	if d := f.maxReqs; d != nil && d.Found {
		return d.Limit
	}
	lo := 0
	for _, c := range f.everyN {
		if lo == 0 || c.Responses < lo {
			lo = c.Responses
		}
	}
	return lo
}

// slowNewConnection: setting up a connection takes more than half of the
// per-request budget, or a request on a new connection ran out of it.
func slowNewConnection(f *facts) (Finding, bool) {
	timeout := f.cfg.timeout
	// A timeout in a setup stage always counts; one later on a new
	// connection only when requests on reused connections made it in
	// time, so that the cost of the new connection is what tipped it.
	timeouts := map[httptrace.Stage]int{}
	timedOut := 0
	for st, n := range f.ev.newConnTimeouts {
		if vocab.SetupStage(st) || f.rep.Stages.Reused.Count > 0 {
			timeouts[st] += n
			timedOut += n
		}
	}
	if f.ev.slowSetups == 0 && timedOut == 0 {
		return Finding{}, false
	}
	var parts []string
	if timedOut > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) ran out of the %s timeout while setting up or on a new connection (%s)",
			timedOut, human(timeout), stageCounts(timeouts)))
	}
	if n := f.ev.slowSetups; n > 0 {
		parts = append(parts, fmt.Sprintf("%d connection setup(s) took more than half of it (up to %s)", n, human(f.ev.slowestSetup)))
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

// servedConns returns the connections that answered at least one
// request.
func servedConns(rep *Result) []Connection {
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
// request and was closed by the server after it, not for being idle: a
// close while idle counts when it came at once (closedAtOnce).
func allOneAndServerClosed(cs []Connection, gap time.Duration) bool {
	judged := 0
	for _, c := range cs {
		if gap == 0 && c.Responses == 1 && c.ClosedBy == vocab.ClosedByClient && c.CloseReason == vocab.ReasonCloseIdle {
			// Closed by the probe's own end before the server's close
			// could come: it says nothing of the server either way.
			// (With a gap, a close during the next request may be the
			// server's idle timeout, which the last could have shown.)
			continue
		}
		judged++
		if c.Responses != 1 || c.ClosedBy != vocab.ClosedByServer {
			return false
		}
		switch c.CloseReason {
		case vocab.ReasonConnectionClose, vocab.ReasonHTTP10, vocab.ReasonServerGoAway, vocab.ReasonServerEOF, vocab.ReasonServerReset:
		default:
			if !closedAtOnce(c, gap) {
				return false
			}
		}
	}
	return judged > 0
}

// closedAtOnce reports whether the server closed c while idle right after
// its response: it says keep-alive and keeps none. Without a gap between
// a worker's requests, any close of an idle connection came before the
// next request could: at once.
func closedAtOnce(c Connection, gap time.Duration) bool {
	return c.CloseReason == vocab.ReasonServerClosedIdle && (gap == 0 || c.IdleBeforeClose < immediateClose)
}

// reasonList names the server close reasons among cs, most frequent first.
func reasonList(cs []Connection, gap time.Duration) string {
	counts := map[string]int{}
	var order []string
	for _, c := range cs {
		if c.ClosedBy != vocab.ClosedByServer {
			continue
		}
		how := howText(string(c.CloseReason))
		if closedAtOnce(c, gap) {
			how = "closed at once after the response, though it did not say Connection: close"
		}
		if counts[how] == 0 {
			order = append(order, how)
		}
		counts[how]++
	}
	slices.SortStableFunc(order, func(a, b string) int { return counts[b] - counts[a] })
	return strings.Join(order, ", ")
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

func discoveryCut(rep *Result) string {
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
