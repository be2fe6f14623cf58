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

// closesEveryNInfo is the requests-per-connection limit from which a
// server that closes every N requests is only worth knowing about.
const closesEveryNInfo = 100

// findings draws the findings from a finished report. Each rule says when
// it fires; each id fires at most once.
func findings(rep *Report, cfg *config, ev *evidence, https bool) []Finding {
	fs := []Finding{}
	add := func(id string, sev Severity, format string, args ...any) {
		fs = append(fs, Finding{ID: id, Severity: sev, Message: fmt.Sprintf(format, args...)})
	}
	has := func(id string) bool {
		return slices.ContainsFunc(fs, func(f Finding) bool { return f.ID == id })
	}
	ok := rep.Outcomes[vocab.ClassOK]
	served := servedConns(rep)
	// judged are the connections whose close may say something of the
	// server's keep-alive limits: not those it closed after an error
	// response, which a server may do whatever its limits.
	judged := slices.DeleteFunc(slices.Clone(served), closedAfterError)

	// request-errors: a request failed, other than by the probe's own
	// deadline or an interruption.
	ended := 0
	for _, n := range rep.Outcomes {
		ended += n
	}
	if failed := ended - ok - rep.Cut; failed > 0 {
		msg := fmt.Sprintf("%d of %d requests failed: %s", failed, rep.Requests, failureSummary(rep.Failures))
		if rep.Cut > 0 {
			msg += fmt.Sprintf(" (%d more cut short by the deadline)", rep.Cut)
		}
		add(FindingRequestErrors, SeverityError, "%s", msg)
	}

	// error-responses: every response was an error; the server's
	// closes after them are not taken for keep-alive limits.
	if errs := errorStatuses(rep.Statuses); ok > 0 && len(errs) == len(rep.Statuses) {
		msg := fmt.Sprintf("every response was an error (%s)", statusList(rep.Statuses, errs))
		if n := len(served) - len(judged); n > 0 {
			msg += fmt.Sprintf("; the server closed %d connection(s) after an error response (Connection: close), which says nothing of its keep-alive limits", n)
		}
		add(FindingErrorResponses, SeverityWarn, "%s: check the URL, method and headers", msg)
	}

	// no-keep-alive: every connection that answered a request answered
	// one and the server closed it after that response.
	if len(judged) > 0 && ok > 0 && allOneAndServerClosed(judged) {
		add(FindingNoKeepAlive, SeverityWarn,
			"the server closed every connection after one response (%s): %d dials for %d requests; with keep-alive %d would do",
			reasonList(judged), rep.Dials, rep.Requests, rep.PerfectDials)
	}
	var disc *MaxRequestsResult
	if rep.Discovery != nil {
		disc = rep.Discovery.MaxRequests
	}
	if disc != nil && disc.Found && disc.Limit == 1 && !has(FindingNoKeepAlive) {
		add(FindingNoKeepAlive, SeverityWarn, "the server closed the connection after its first response (%s)", howText(disc.How))
	}

	// server-closes-every-n: the server closed connections after N ≥ 2
	// requests, saying so (Connection: close, or GOAWAY) or, without
	// notice, at the same count on two connections or more; or discovery
	// found its limit. A connection counts the requests answered on it.
	var everyN []Connection
	if !has(FindingNoKeepAlive) {
		switch {
		case disc != nil && disc.Found && disc.Limit >= 2:
			sev := SeverityWarn
			if disc.Limit >= closesEveryNInfo {
				sev = SeverityInfo
			}
			msg := fmt.Sprintf("the server closes each connection after %d requests (%s)", disc.Limit, howText(disc.How))
			if disc.ErrorResponses > 0 {
				msg += fmt.Sprintf(" (measured on responses of which %d were errors)", disc.ErrorResponses)
			}
			if !announced(disc.How) {
				msg += ": it does so without notice, so the next request on the connection fails or is retried by the Transport"
			}
			if rep.Dials > int64(rep.PerfectDials) {
				msg += fmt.Sprintf("; the main run dialed %d times for %d requests, %d with perfect keep-alive", rep.Dials, rep.Requests, rep.PerfectDials)
			}
			add(FindingServerClosesEveryN, sev, "%s", msg)
			everyN = silentAtOneCount(judged)
		default:
			notice := true
			everyN = announcedCloses(judged)
			if len(everyN) == 0 {
				notice = false
				everyN = silentAtOneCount(judged)
			}
			if len(everyN) == 0 {
				break
			}
			lo, hi := everyN[0].Responses, everyN[0].Responses
			for _, c := range everyN {
				lo, hi = min(lo, c.Responses), max(hi, c.Responses)
			}
			sev := SeverityWarn
			if lo >= closesEveryNInfo {
				sev = SeverityInfo
			}
			every := fmt.Sprintf("%d", lo)
			if hi != lo {
				every = fmt.Sprintf("%d to %d", lo, hi)
			}
			msg := fmt.Sprintf("the server closed %d connection(s) after %s requests each (%s)", len(everyN), every, reasonList(everyN))
			if !notice {
				msg += ", without notice, so the next request on such a connection fails or is retried by the Transport"
			}
			add(FindingServerClosesEveryN, sev, "%s: %d dials for %d requests, %d with perfect keep-alive",
				msg, rep.Dials, rep.Requests, rep.PerfectDials)
		}
	}

	// server-idle-shorter-than-client: the server closed idle connections
	// the client would have kept (other than those server-closes-every-n
	// took for closes after N requests), or discovery found its idle
	// timeout below the client's.
	closedAtN := make(map[uint64]bool, len(everyN))
	for _, c := range everyN {
		closedAtN[c.ID] = true
	}
	var idleClosed []time.Duration
	for _, c := range served {
		if c.CloseReason == vocab.ReasonServerClosedIdle && !closedAtN[c.ID] {
			idleClosed = append(idleClosed, c.IdleBeforeClose)
		}
	}
	var idle *IdleTimeoutResult
	if rep.Discovery != nil {
		idle = rep.Discovery.IdleTimeout
	}
	switch {
	case idle != nil && idle.Found && idle.Closed < cfg.clientIdle:
		add(FindingServerIdleShorterThanClient, SeverityWarn,
			"the server's idle timeout is %s; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry): keep the client's idle timeout below %s",
			bracket(idle.Survived, idle.Closed), human(cfg.clientIdle), human(max(idle.Survived, idle.Closed/2)))
	case len(idleClosed) > 0:
		slices.Sort(idleClosed)
		add(FindingServerIdleShorterThanClient, SeverityWarn,
			"the server closed %d idle connection(s), after %s idle; the client keeps idle connections for %s, so it may send a request on a connection the server is closing (a failed request or a hidden retry)",
			len(idleClosed), spread(idleClosed), human(cfg.clientIdle))
	}

	// h2-not-offered: over TLS, with HTTP/2 allowed, no connection
	// negotiated it.
	if https && !cfg.http1 && rep.TLS != nil && len(served) > 0 && rep.Protocols["h2"] == 0 {
		sev := SeverityInfo
		if cfg.requireHTTP2 {
			sev = SeverityError
		}
		alpn := rep.TLS.ALPN
		if alpn == "" {
			alpn = "none"
		}
		add(FindingH2NotOffered, sev, "the server did not select HTTP/2 over TLS (ALPN: %s): each concurrent request needs its own connection", alpn)
	}

	// hidden-retries: the Transport retried requests by itself.
	if rep.HiddenRetries > 0 {
		add(FindingHiddenRetries, SeverityWarn,
			"the Transport sent %d request(s) again on another connection by itself (%d extra attempt(s)), after the connection it had sent them on failed before any response: the server may or may not have processed the first attempt, so a request that is not idempotent risks running twice",
			rep.HiddenRetries, rep.ExtraAttempts)
	}

	// slow-new-connection: setting up a connection takes more than half of
	// the per-request budget, or a request on a new connection ran out of
	// it.
	half := cfg.timeout / 2
	var slow []time.Duration
	for _, d := range ev.setups {
		if d > half {
			slow = append(slow, d)
		}
	}
	// A timeout in a setup stage always counts; one later on a new
	// connection only when requests on reused connections made it in
	// time, so that the cost of the new connection is what tipped it.
	timeouts := map[httptrace.Stage]int{}
	timedOut := 0
	for st, n := range ev.newConnTimeouts {
		if setupStage(st) || rep.Stages.Reused.Count > 0 {
			timeouts[st] += n
			timedOut += n
		}
	}
	if len(slow) > 0 || timedOut > 0 {
		var parts []string
		if timedOut > 0 {
			parts = append(parts, fmt.Sprintf("%d request(s) ran out of the %s timeout while setting up or on a new connection (%s)",
				timedOut, human(cfg.timeout), stageCounts(timeouts)))
		}
		if len(slow) > 0 {
			slices.Sort(slow)
			parts = append(parts, fmt.Sprintf("%d connection setup(s) took more than half of it (up to %s)", len(slow), human(slow[len(slow)-1])))
		}
		add(FindingSlowNewConnection, SeverityWarn, "%s: reuse hides it until a new connection is needed", strings.Join(parts, "; "))
	}

	// tls-not-resumed: connections dialed after a handshake had finished
	// could have resumed its session, and none did.
	if t := rep.TLS; t != nil && t.Resumable > 0 && t.Resumed == 0 {
		add(FindingTLSNotResumed, SeverityInfo,
			"none of the %d TLS connection(s) that could have resumed a session did: each new connection pays a full handshake", t.Resumable)
	}

	// deadline-reached: the probe's deadline cut it short.
	if rep.DeadlineReached {
		add(FindingDeadlineReached, SeverityWarn, "the %s deadline stopped the probe: %d of %d requests sent, %d cut short%s",
			human(cfg.deadline), rep.Requests, rep.Requested, rep.Cut, discoveryCut(rep))
	}
	return fs
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
