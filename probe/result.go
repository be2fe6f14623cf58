package probe

import (
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
)

// schemaVersion names the JSON form of a [Result].
const schemaVersion = "connaudit.probe/v1"

// Result is what a probe found. It marshals to the stable JSON form
// described in the package documentation. Every URL and error in it is
// redacted.
type Result struct {
	// Schema names the JSON form: "connaudit.probe/v1". It changes only
	// when a field changes meaning or goes away (fields may be added).
	Schema string `json:"schema"`
	// Target is the redacted URL; Method the request method.
	Target string `json:"target"`
	Method string `json:"method"`
	// Requested is the number of requests asked for; Requests those sent
	// (fewer when the deadline or an interruption stopped the run).
	Requested int `json:"requested"`
	Requests  int `json:"requests"`
	// Concurrency, MaxConnsPerHost, Gap, Timeout, Deadline and
	// IdleConnTimeout are the settings of the options of those names
	// (MaxConnsPerHost 0: no cap; Deadline 0: none). IdleConnTimeout is
	// how long the probe's client kept idle connections.
	Concurrency     int           `json:"concurrency"`
	MaxConnsPerHost int           `json:"max_conns"`
	Gap             time.Duration `json:"gap_ns"`
	Timeout         time.Duration `json:"timeout_ns"`
	Deadline        time.Duration `json:"deadline_ns"`
	IdleConnTimeout time.Duration `json:"client_idle_timeout_ns"`
	// Elapsed is how long the whole probe took, discovery included;
	// MainElapsed how long the main run's requests took, from the start
	// until the last of them ended.
	Elapsed     time.Duration `json:"elapsed_ns"`
	MainElapsed time.Duration `json:"main_elapsed_ns"`
	// DeadlineReached is set when the deadline stopped the probe; Cut
	// counts the main-run requests it ended.
	DeadlineReached bool `json:"deadline_reached"`
	Cut             int  `json:"cut_by_deadline"`
	// Interrupted is set when the caller's context ended the probe.
	Interrupted bool `json:"interrupted"`
	// Unreachable is set when no main-run request got a response (Run
	// then returns an [*UnusableError] too), the caller's context aside.
	Unreachable bool `json:"unreachable"`
	// Duration is the [Duration] option's setting, 0 without it: the main
	// run sent requests until it had passed (at most Requested).
	Duration time.Duration `json:"duration_ns,omitempty"`
	// RequestsPerSecond is Requests over MainElapsed.
	RequestsPerSecond float64 `json:"requests_per_second"`

	// Outcomes counts the main-run requests by outcome class; Statuses
	// the responses by status code.
	Outcomes map[httptrace.Class]int `json:"outcomes"`
	Statuses map[int]int             `json:"statuses"`
	// Failures lists up to 10 distinct failures, with a count each.
	Failures []Failure `json:"failures"`
	// HiddenRetries counts requests the Transport sent more than once by
	// itself: their timeline asked for a connection (GetConn) again after
	// it had got one (GotConn). ExtraAttempts counts those attempts.
	// Timeline.GetConns > 1 alone is not used: a request on a new HTTP/2
	// connection fires GetConn twice (http.Transport's, then the http2
	// connection pool's) and is sent once.
	HiddenRetries int `json:"hidden_retries"`
	ExtraAttempts int `json:"extra_attempts"`
	// The hidden retries judged on the evidence: HiddenRetriesNotProcessed
	// counts those the server certainly did not process the first time
	// (HiddenRetriesWhy says why: "never-written", no byte of the attempt
	// was written; "server-closed-first", the server's close came before
	// it was written; "stale-idle", written to a connection idle for the
	// server's idle timeout, which the server closed without a response
	// byte; "h2-goaway-or-refused", an HTTP/2 stream above the last stream
	// id of a GOAWAY, or refused with REFUSED_STREAM).
	// HiddenRetriesPossiblyProcessed counts the others: written to a live
	// connection, which then failed; the server may have run them twice.
	// The two add up to HiddenRetries.
	HiddenRetriesNotProcessed      int            `json:"hidden_retries_not_processed"`
	HiddenRetriesPossiblyProcessed int            `json:"hidden_retries_possibly_processed"`
	HiddenRetriesWhy               map[string]int `json:"hidden_retries_not_processed_why,omitempty"`

	// Dials counts the connections the main run dialed (failed and
	// abandoned dials included); DialErrors the dials that failed;
	// DialsAbandoned the dials (or their TLS handshakes) the Transport
	// cancelled once no request needed them: nothing failed.
	// PerfectDials is what Dials would be with perfect keep-alive.
	Dials          int64 `json:"dials"`
	DialErrors     int64 `json:"dial_errors"`
	DialsAbandoned int64 `json:"dials_abandoned"`
	PerfectDials   int   `json:"perfect_dials"`
	// PerConn summarises the requests answered per connection
	// ([Connection].Responses), over the connections that answered at
	// least one: a request the Transport sent again on another connection
	// counts once, on the connection that answered it.
	PerConn struct {
		Min  int     `json:"min"`
		Max  int     `json:"max"`
		Mean float64 `json:"mean"`
	} `json:"requests_per_connection"`
	// Protocols counts the connections that carried a request by protocol
	// ("HTTP/1.1", "h2", "HTTP/1.0"): an HTTP/2 connection the Transport
	// dialed beside another and never used is not counted.
	Protocols map[string]int `json:"protocols"`
	// TLS summarises the TLS connections, nil without TLS.
	TLS *TLSSummary `json:"tls,omitempty"`
	// Connections lists the main run's connections in dial order (at most
	// 4096; ConnectionsOmitted counts the others); ClosedBy counts every
	// close by reason.
	Connections        []Connection               `json:"connections"`
	ConnectionsOmitted int                        `json:"connections_omitted"`
	ClosedBy           map[pool.CloseReason]int64 `json:"closed_by"`
	// Stages are stage-duration percentiles of the successful main-run
	// requests, split by whether the request dialed a new connection.
	// ReuseSaves is what a request on a reused connection does not spend:
	// the median of DNS, connect and TLS together on new connections,
	// when there are requests on both. (The totals' difference would
	// count the server's answers too: a slow first response is no cost
	// of a new connection.)
	Stages struct {
		New        StageSet       `json:"new"`
		Reused     StageSet       `json:"reused"`
		ReuseSaves *time.Duration `json:"reuse_saves_ns,omitempty"`
	} `json:"stages"`

	// KeepAlive is what the server said of its own keep-alive limits in a
	// Keep-Alive response header, as in "timeout=5, max=100" (absent from
	// the JSON when no response had one). Header is the first such value
	// (on one line, at most 200 bytes); Responses counts the responses
	// that had one; Timeout and Max are its largest timeout and max (0
	// when it gave none).
	KeepAlive struct {
		Header    string        `json:"header"`
		Responses int           `json:"responses"`
		Timeout   time.Duration `json:"timeout_ns,omitempty"`
		Max       int           `json:"max,omitempty"`
	} `json:"server_keep_alive,omitzero"`

	// Discovery holds the results of the discovery phases that ran.
	Discovery *Discovery `json:"discovery,omitempty"`
	// Findings are what the probe concluded, most severe first.
	Findings []Finding `json:"findings"`
	// Timelines are the main run's timelines, with [KeepTimelines].
	Timelines []*httptrace.Timeline `json:"timelines,omitempty"`
}

// Failure is one kind of failed request.
type Failure struct {
	Class httptrace.Class `json:"class"`
	Stage httptrace.Stage `json:"stage"`
	// Error is the first such error's text, redacted.
	Error string `json:"error"`
	Count int    `json:"count"`
}

// TLSSummary describes the TLS connections of the main run.
type TLSSummary struct {
	// Versions counts connections by TLS version ("TLS 1.3").
	Versions map[string]int `json:"versions"`
	// Connections counts TLS connections; Resumed those whose handshake
	// resumed an earlier session; Resumable those that could have: those
	// whose handshake began after another connection's had finished, and
	// those that resumed. Resumable is never less than Resumed.
	Connections int `json:"connections"`
	Resumed     int `json:"resumed"`
	Resumable   int `json:"resumable"`
	// ALPN is the protocol the server selected on the first connection,
	// "" when it selected none.
	ALPN string `json:"alpn"`
}

// Connection is one connection of the main run.
type Connection struct {
	ID         uint64 `json:"id"`
	Proto      string `json:"proto,omitempty"`
	TLSVersion string `json:"tls_version,omitempty"`
	TLSResumed bool   `json:"tls_resumed,omitempty"`
	// Requests counts the requests it carried, a request the Transport
	// retried on another connection included; Responses those whose
	// response came on it (a request sent on several connections counts
	// on the last, if it got a response).
	Requests  int `json:"requests"`
	Responses int `json:"responses"`
	// ClosedBy is "client" or "server"; CloseReason says why (see
	// [pool.CloseReason]); CloseDetail adds the failed request's class.
	ClosedBy    pool.Closer      `json:"closed_by,omitempty"`
	CloseReason pool.CloseReason `json:"close_reason,omitempty"`
	CloseDetail string           `json:"close_detail,omitempty"`
	// CloseStatus is the status of the response with which the server
	// announced the close (Connection: close, or HTTP/1.0 without
	// keep-alive), when it did.
	CloseStatus int `json:"close_status,omitempty"`
	// IdleBeforeClose is how long it had been idle when the server closed
	// it while idle.
	IdleBeforeClose time.Duration `json:"idle_before_close_ns,omitempty"`
	// DialError is set on a dial that failed. DialAbandoned is set instead
	// on a dial or TLS handshake the Transport cancelled once no request
	// needed it ([pool.Conn].Abandoned).
	DialError     string `json:"dial_error,omitempty"`
	DialAbandoned bool   `json:"dial_abandoned,omitempty"`
	// DialedAt is when its dial began, FirstUsedAt when it was first
	// handed to a request (absent: never), ClosedAt when it closed
	// (absent: open at the report).
	DialedAt    time.Time `json:"dialed_at,omitzero"`
	FirstUsedAt time.Time `json:"first_used_at,omitzero"`
	ClosedAt    time.Time `json:"closed_at,omitzero"`
}

// StageSet are the percentiles of each stage over Count requests.
type StageSet struct {
	Count    int         `json:"count"`
	DNS      Percentiles `json:"dns"`
	Connect  Percentiles `json:"connect"`
	TLS      Percentiles `json:"tls"`
	PoolWait Percentiles `json:"pool_wait"`
	Write    Percentiles `json:"write"`
	Server   Percentiles `json:"server"`
	Transfer Percentiles `json:"transfer"`
	Total    Percentiles `json:"total"`
}

// Percentiles of a stage's durations (nearest rank).
type Percentiles struct {
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Discovery holds the results of the discovery phases.
type Discovery struct {
	// Requests and Dials count the discovery requests and dials, apart
	// from the main run's.
	Requests    int                `json:"requests"`
	Dials       int64              `json:"dials"`
	MaxRequests *MaxRequestsResult `json:"max_requests,omitempty"`
	IdleTimeout *IdleTimeoutResult `json:"idle_timeout,omitempty"`
}

// MaxRequestsResult is what the requests-per-connection discovery found.
type MaxRequestsResult struct {
	// Requests counts the requests it sent; Bound is the most it would.
	// Dials counts the connections it dialed.
	Requests int   `json:"requests"`
	Bound    int   `json:"bound"`
	Dials    int64 `json:"dials"`
	// Found is set when the server closed the connection; Limit is then
	// the number of responses it gave on it.
	Found bool `json:"found"`
	Limit int  `json:"limit,omitempty"`
	// How says how the server closed it: "connection-close" (it said so
	// on the last response), "http1.0-no-keep-alive", "goaway", or the
	// pool's close reason when it closed without notice.
	How string `json:"how,omitempty"`
	// HiddenRetry is set when the Transport had to retry the next request
	// because the server closed without notice.
	HiddenRetry bool `json:"hidden_retry,omitempty"`
	// ErrorResponses counts the responses on the measured connection with
	// a status of 400 or more. A connection the server closed right after
	// an error response gives no limit: a server may close after an error
	// whatever its keep-alive limit, and Error then says so.
	ErrorResponses int `json:"error_responses,omitempty"`
	// Error is why the discovery stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// IdleTimeoutResult is what the idle-timeout discovery found: the server's
// idle timeout lies in (Survived, Closed].
type IdleTimeoutResult struct {
	// Requests counts the requests it sent; Trials the idle gaps tried;
	// Dials the connections it dialed.
	Requests int   `json:"requests"`
	Trials   int   `json:"trials"`
	Dials    int64 `json:"dials"`
	// Max is the longest gap it would try.
	Max time.Duration `json:"max_ns"`
	// Found is set when some gap was too long for the server.
	Found bool `json:"found"`
	// Survived is the longest gap a connection survived (0 if none);
	// Closed the shortest it did not (0 if none).
	Survived time.Duration `json:"survived_ns"`
	Closed   time.Duration `json:"closed_ns,omitempty"`
	// Complete is set when the search reached its resolution or max; it
	// is unset when the deadline or an error stopped it.
	Complete bool `json:"complete"`
	// Error is why the discovery stopped early, if it did.
	Error string `json:"error,omitempty"`
}
