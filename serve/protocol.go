package serve

// The wire types of the protocol, connaudit.serve/v1 (docs/serve.md). Times
// are in milliseconds.

import "github.com/connaudit/connaudit/audit"

// Protocol is the name and version of the protocol this package speaks.
const Protocol = "connaudit.serve/v1"

// Client names the client under test, as its kit says it.
type Client struct {
	// Name names the client under test (requests, fetch, …).
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Config says how the client is configured, in its own terms.
	Config string `json:"config,omitempty"`
	// IdleTimeoutMS is how long the client keeps an idle connection
	// before it closes it itself, as configured: 0 when it never does (it
	// keeps one until the server closes it), absent when the kit does not
	// know. A client that keeps one as long as the servers do, or longer,
	// fails the scenarios whose server closes idle connections itself.
	IdleTimeoutMS *float64 `json:"idle_timeout_ms,omitempty"`
	// Terms says, for each term a kit knows (a bound of the policy such as
	// read_timeout, a retry rule such as retry_statuses, a behaviour such
	// as stale: docs/serve.md lists them), what fixes its failure in the
	// client's own terms: its option, flag or class. A term left out is
	// said in the policy's own terms. An open request only: a session's
	// report leaves it out.
	Terms map[string]string `json:"terms,omitempty"`
}

// OpenRequest opens a session: POST /v1/sessions.
type OpenRequest struct {
	Protocol  string   `json:"protocol"`
	Kit       string   `json:"kit"`
	Client    Client   `json:"client"`
	Protocols []string `json:"protocols,omitempty"`
	Run       string   `json:"run,omitempty"`
	Skip      string   `json:"skip,omitempty"`
}

// Opened answers an [OpenRequest].
type Opened struct {
	Protocol     string `json:"protocol"`
	Session      string `json:"session"`
	ScenariosURL string `json:"scenarios_url"`
	ReportURL    string `json:"report_url"`
	DoneURL      string `json:"done_url"`
}

// Policy is a scenario's whole client configuration in plain numbers; 0
// means not set.
type Policy struct {
	AttemptTimeoutMS float64 `json:"attempt_timeout_ms"`
	TotalTimeoutMS   float64 `json:"total_timeout_ms"`
	MaxRetries       int     `json:"max_retries"`
	DelayMS          float64 `json:"delay_ms"`
	// RetryStatuses are the statuses retried; RetryErrors whether a
	// connection error or a timeout is.
	RetryStatuses []int `json:"retry_statuses"`
	RetryErrors   bool  `json:"retry_errors"`
	// RetryMethods may be replayed; RetryWithIdempotencyKey lets any
	// method with an Idempotency-Key be; RetryAnyMethod lets any be.
	RetryMethods            []string `json:"retry_methods"`
	RetryWithIdempotencyKey bool     `json:"retry_with_idempotency_key"`
	RetryAnyMethod          bool     `json:"retry_any_method"`
	ConnectTimeoutMS        float64  `json:"connect_timeout_ms"`
	ReadTimeoutMS           float64  `json:"read_timeout_ms"`
	TLSTimeoutMS            float64  `json:"tls_timeout_ms"`
	PoolMaxPerHost          int      `json:"pool_max_per_host"`
	PoolAcquireTimeoutMS    float64  `json:"pool_acquire_timeout_ms"`
	// SendPingTimeoutMS and PingTimeoutMS are HTTP/2's health check: a
	// PING after that long without a frame read, and the connection closed
	// when its answer takes longer than PingTimeoutMS.
	SendPingTimeoutMS float64 `json:"send_ping_timeout_ms,omitempty"`
	PingTimeoutMS     float64 `json:"ping_timeout_ms,omitempty"`
}

// Request is a scenario's faulted request.
type Request struct {
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// KeyPerAttempt, when set, asks for a new Idempotency-Key per attempt:
	// KeyPerAttempt-attempt-1, -2, …
	KeyPerAttempt string `json:"key_per_attempt,omitempty"`
}

// Expectation is what the caller must be given: a status, or an error of
// a kind (timeout, connection, canceled, pool).
type Expectation struct {
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Attempts is how many attempts the catalogue's client makes for the
	// call: more than 1 only where the policy's retries are the point.
	Attempts int `json:"attempts"`
	// Or, when set, is another outcome the caller may get instead, equally
	// correct (a lost connection's error where a client may send the
	// request again, or the reverse).
	Or *Expectation `json:"or,omitempty"`
}

// The error kinds a kit reports.
const (
	KindTimeout    = "timeout"
	KindConnection = "connection"
	KindCanceled   = "canceled"
	KindPool       = "pool"
	KindOther      = "other"
)

// ScenarioSpec is a scenario as a kit gets it.
type ScenarioSpec struct {
	Name     string      `json:"name"`
	Contract string      `json:"contract,omitempty"`
	Proto    string      `json:"proto"`
	Fault    string      `json:"fault"`
	Steps    audit.Steps `json:"steps"`
	URL      string      `json:"url"`
	OKURL    string      `json:"ok_url"`
	// WarmURL and WarmRequests: the warm-ups' URL (url itself, or one of
	// their own) and how many (warm-then-request, warm-close-then-request,
	// warm-then-held-body).
	WarmURL      string `json:"warm_url,omitempty"`
	WarmRequests int    `json:"warm_requests,omitempty"`
	EnteredURL   string `json:"entered_url,omitempty"`
	HoldURL      string `json:"hold_url,omitempty"`
	CloseURL     string `json:"close_url,omitempty"`
	// SettleURL, when present, is POSTed after the faulted call and before
	// /ok: the server answers once the client has closed the connection
	// the fault made unusable (one gone dark), or after its bound.
	SettleURL string      `json:"settle_url,omitempty"`
	ReadBytes int         `json:"read_bytes,omitempty"`
	Request   Request     `json:"request"`
	Policy    Policy      `json:"policy"`
	Expect    Expectation `json:"expect"`
	GuardMS   float64     `json:"guard_ms"`
}

// Scenarios answers GET /v1/sessions/{session}/scenarios.
type Scenarios struct {
	Protocol  string         `json:"protocol"`
	Session   string         `json:"session"`
	Scenarios []ScenarioSpec `json:"scenarios"`
}

// ErrorOutcome is an error the caller got.
type ErrorOutcome struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
}

// Outcome is what the caller got: a status, or an error.
type Outcome struct {
	Status    int           `json:"status,omitempty"`
	Error     *ErrorOutcome `json:"error,omitempty"`
	ElapsedMS float64       `json:"elapsed_ms,omitempty"`
}

// KitReport is a kit's report of one scenario: POST …/reports.
type KitReport struct {
	Scenario        string   `json:"scenario"`
	Outcome         *Outcome `json:"outcome,omitempty"`
	ElapsedMS       float64  `json:"elapsed_ms"`
	Attempts        *int     `json:"attempts,omitempty"`
	OK              *Outcome `json:"ok,omitempty"`
	Config          string   `json:"config,omitempty"`
	NotConfigurable string   `json:"not_configurable,omitempty"`
	Skipped         string   `json:"skipped,omitempty"`
}

// Done ends a session: POST …/done.
type Done struct {
	Error string `json:"error,omitempty"`
}

// apiError is the body of every error answer.
type apiError struct {
	Protocol string `json:"protocol"`
	Error    string `json:"error"`
}
