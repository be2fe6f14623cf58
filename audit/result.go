package audit

import (
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
)

// Observed is what a scenario run saw.
type Observed struct {
	Class  httptrace.Class `json:"class"`
	Stage  httptrace.Stage `json:"stage,omitempty"`
	Status int             `json:"status,omitempty"`
	Error  string          `json:"error,omitempty"`
	// ClientAttempts counts the round trips the caller made for the
	// faulted request; ServerRequests the requests the server read for it.
	ClientAttempts int   `json:"client_attempts"`
	ServerRequests int64 `json:"server_requests"`
	// GetConns counts the times the Transport asked for a connection for
	// the faulted request: more than ClientAttempts means it retried by
	// itself.
	GetConns int `json:"get_conns"`
	// TransportRetries counts the times the Transport sent the faulted
	// request again on another connection, by itself.
	TransportRetries int `json:"transport_retries,omitempty"`
	// Dials is the number of dials before recovery.
	Dials int64 `json:"dials"`
	// BodyBytes is the number of body bytes the client read of the
	// faulted response (its last attempt's).
	BodyBytes int64 `json:"body_bytes"`
	// Fate is the faulted connection's fate after recovery.
	Fate Fate `json:"fate"`
	// Conn is the faulted connection's id.
	Conn uint64 `json:"conn,omitempty"`
	// HiddenRetry is set when the server saw more requests than the
	// client made attempts.
	HiddenRetry bool `json:"hidden_retry,omitempty"`
	// CancelObserved is set when the server's handler saw the client go.
	CancelObserved bool `json:"cancel_observed,omitempty"`
	// Writes counts the side effects the server committed, and Keys the
	// idempotency keys it received, in order (write-safety contracts).
	Writes int64    `json:"writes,omitempty"`
	Keys   []string `json:"idempotency_keys,omitempty"`
	// HandlersEntered counts the times the server entered the faulted
	// path's handler.
	HandlersEntered int64 `json:"handlers_entered,omitempty"`
	// Unread counts the requests the server closed a connection on
	// without reading them: requests the client sent on a connection
	// already being closed.
	Unread int64 `json:"unread,omitempty"`
	// ConnsAccepted counts the TCP connections a server below HTTP
	// accepted (tls-handshake-stall).
	ConnsAccepted int64 `json:"conns_accepted,omitempty"`
	// Unbounded is set when the guard deadline, not a client bound, ended
	// the faulted request; UnboundedStage is the stage it hung in.
	Unbounded      bool            `json:"unbounded,omitempty"`
	UnboundedStage httptrace.Stage `json:"unbounded_stage,omitempty"`
	// Beyond, when set, is the client's bound on the stage in flight that
	// the guard ended the call at: one the runner sees, longer than the
	// guard deadline ([GuardDeadline]), so not waited for and not judged,
	// such as "net.Dialer.Timeout (30s)". UnboundedStage is that stage.
	// On a connection gone dark it is the HTTP/2 health check, longer than
	// the deadline, that would have closed it ("SendPingTimeout 30s +
	// PingTimeout 15s"); neither the outcome nor the fate is judged.
	Beyond string `json:"beyond_guard,omitempty"`
	// LeakFound lists what the pool check found while the scenario's own
	// leak was in place (unclosed-body).
	LeakFound []string `json:"leak_found,omitempty"`
	// BlockedOK is set when a request to /ok waited for the leaked
	// connection.
	BlockedOK bool `json:"blocked_ok,omitempty"`
	// Recovered is set when the same pool served /ok afterwards.
	Recovered bool `json:"recovered"`
	// Leaks lists what was left behind after recovery: open bodies,
	// active connections, goroutines.
	Leaks []string `json:"leaks,omitempty"`
	// Notes are remarks that do not fail the scenario.
	Notes []string `json:"notes,omitempty"`
	// Timeline is the faulted request's timeline (the last attempt's).
	Timeline *httptrace.Timeline `json:"timeline,omitempty"`
	// Attempts holds every attempt's timeline, in order, when the faulted
	// request took more than one round trip (a retry layer's attempts);
	// the last is Timeline.
	Attempts []*httptrace.Timeline `json:"attempts,omitempty"`
	// lost lists why the pool closed connections that had served a
	// request, by the client, for a setting of the transport's
	// (keep-alives off, its idle timeout, a full idle pool), by the time
	// the call was observed: what kept a connection from being reused.
	lost []pool.CloseReason
	// beneath is set when the faulted request failed writing to a
	// connection net/http had closed beneath it on the server's close
	// ([closedBeneath]).
	beneath bool
}

// Result is the outcome of one scenario.
type Result struct {
	Name     string `json:"name"`
	Contract string `json:"contract,omitempty"`
	Proto    Proto  `json:"proto"`
	Fault    string `json:"fault"`
	// Bound is the catalogue's reference bound ([Scenario.Bound]): the
	// reference pool's, not the audited transport's.
	Bound    string   `json:"bound"`
	Pass     bool     `json:"pass"`
	Expected Expect   `json:"expected"`
	Observed Observed `json:"observed"`
	// Mismatches lists every difference between Expected and Observed,
	// and every recovery failure.
	Mismatches []string `json:"mismatches,omitempty"`
	// Fix, on a failed result, says what fixes it: what bounds the stage
	// in an http.Transport and how to set it (ResponseHeaderTimeout,
	// TLSHandshakeTimeout, a net.Dialer's Timeout, connaudit's body-idle
	// watchdog…), or the setting that explains the connection's fate. On
	// a result skipped because the transport cannot speak its protocol,
	// it says how to make it.
	Fix string `json:"fix,omitempty"`
	// Skipped, when set, says why the scenario has no verdict: the run's
	// context ended before it started ("not started: context deadline
	// exceeded") or while it ran ("cut: …"), its protocol is not meant
	// ("HTTP/2 is not meant"), or the transport cannot speak it
	// ([Protocols]). A skipped result does not pass, has no mismatches,
	// and counts in [Report.Skipped], not in Failed; its Observed is empty
	// unless it was cut.
	Skipped string `json:"skipped,omitempty"`
	// NotConfigurable, when set, says why a retry contract was not run:
	// the retry layer under audit has no equivalent of a setting the
	// contract needs (a total budget, a rule for POST). Such a result
	// neither passes nor fails; it counts in [Report.NotConfigurable].
	NotConfigurable string `json:"not_configurable,omitempty"`
	// Elapsed is the scenario's wall time; Wait the time it inherently
	// needs.
	Elapsed time.Duration `json:"elapsed_ns"`
	Wait    time.Duration `json:"wait_ns"`
}

// Report is the outcome of a run.
type Report struct {
	// Results holds one result per scenario given, in order, run or
	// skipped.
	Results []Result `json:"results"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	// Skipped counts the scenarios not run ([Result.Skipped]).
	Skipped int `json:"skipped"`
	// NotConfigurable counts the retry contracts the retry layer could
	// not be configured for ([Result.NotConfigurable]); they do not make
	// the report fail.
	NotConfigurable int `json:"not_configurable,omitempty"`
	// Incomplete is set when the run's context ended before every
	// scenario was started.
	Incomplete bool `json:"incomplete,omitempty"`
	// Findings are problems of the audited client as a whole, each with
	// its fix: a protocol meant that the transport cannot speak
	// ([Protocols]).
	Findings []string `json:"findings,omitempty"`
	// Elapsed is the run's wall time; Wait the sum of the scenarios'
	// inherent waits, however many ran at once (Parallel): run side by
	// side, they take less than their sum.
	Elapsed time.Duration `json:"elapsed_ns"`
	Wait    time.Duration `json:"wait_ns"`
	// Parallel is how many scenarios ran at once ([Parallel]); 0 when
	// unknown (a report not made by [Runner.NewReport]).
	Parallel int `json:"parallel,omitempty"`
	// Transport names the client configuration audited; Protocols the
	// protocols it is meant to speak: "either" (not declared), "HTTP/1
	// only", "HTTP/2 only" or "HTTP/1 and HTTP/2"; Retry the retry layer
	// that ran the retry contracts.
	Transport string `json:"transport"`
	Protocols string `json:"protocols"`
	Retry     string `json:"retry,omitempty"`
	// GoVersion is the runtime that ran it.
	GoVersion string `json:"go_version"`

	// RetryRow says how the retry layer was set: "configured" for the
	// contracts (WithRetry's configure), or "defaults" ([RetryAtDefaults]);
	// "" for package retry, the reference.
	RetryRow string `json:"retry_row,omitempty"`

	retryName, retryRow string // named in Retry and RetryRow once a contract is added
}

// Add adds the result of one scenario to the report and counts it; the
// report names the retry layer once a retry contract is added.
func (r *Report) Add(res Result) {
	r.Results = append(r.Results, res)
	if res.Contract != "" && r.Retry == "" {
		r.Retry, r.RetryRow = r.retryName, r.retryRow
	}
	if res.Skipped == "" {
		r.Wait += res.Wait
	}
	switch {
	case res.Skipped != "":
		r.Skipped++
	case res.NotConfigurable != "":
		r.NotConfigurable++
	case res.Pass:
		r.Passed++
	default:
		r.Failed++
	}
}

// OK reports whether the run is complete, with no finding, no failure and
// at least one pass: scenarios skipped for their protocol do not count
// against it, nor do retry contracts the retry layer could not be
// configured for (NotConfigurable counts them; a test that wants every
// contract judged checks that it is 0).
func (r Report) OK() bool {
	return r.Failed == 0 && !r.Incomplete && len(r.Findings) == 0 && r.Passed > 0
}
