package audit

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// Proto is the protocol a scenario runs over.
type Proto string

// The protocols.
const (
	HTTP1 Proto = "http1" // HTTP/1.1 over plain TCP
	HTTP2 Proto = "h2"    // HTTP/2 over TLS
)

// Fate is what became of the connection that served the faulted request.
// Zero fields are not checked.
type Fate struct {
	// ClosedBy and Reason say who closed it and why; both empty when it
	// stayed open.
	ClosedBy pool.Closer      `json:"closed_by,omitempty"`
	Reason   pool.CloseReason `json:"reason,omitempty"`
	// Reused is set when the recovery request was served by it.
	Reused bool `json:"reused"`
	// None is set when the faulted request had no connection: it got
	// none, and none was dialed for it (or the dial failed).
	None bool `json:"none,omitempty"`
}

// FateKind is what became of a connection, in one word ([Fate.Kind]).
type FateKind string

// The fates of the faulted request's connection.
const (
	FateReused FateKind = "reused" // it served the recovery request
	FateOpen   FateKind = "open"   // it stayed open, and another connection served the recovery request
	FateClosed FateKind = "closed" // it was closed: Fate.ClosedBy and Fate.Reason say by whom and why
	FateNone   FateKind = "none"   // the faulted request had no connection, and none was dialed for it
)

// Kind says what became of the connection, in one word.
func (f Fate) Kind() FateKind {
	switch {
	case f.None:
		return FateNone
	case f.ClosedBy != "":
		return FateClosed
	case f.Reused:
		return FateReused
	}
	return FateOpen
}

// String says the fate in words, such as "closed by server (server-eof)",
// or "-" when there was no connection.
func (f Fate) String() string {
	switch {
	case f.None:
		return "-"
	case f.ClosedBy != "":
		return fmt.Sprintf("closed by %s (%s)", f.ClosedBy, f.Reason)
	case f.Reused:
		return "reused"
	}
	return "open"
}

// Expect is what a scenario must observe.
type Expect struct {
	// Class is the outcome class of the faulted request; Stage, when set,
	// the stage it ended in; Status, when set, its status code.
	Class  httptrace.Class `json:"class"`
	Stage  httptrace.Stage `json:"stage,omitempty"`
	Status int             `json:"status,omitempty"`
	// ClientAttempts is the number of round trips the caller made for the
	// faulted request (a retry policy makes several).
	ClientAttempts int `json:"client_attempts"`
	// ServerRequests is the number of those requests the server read.
	ServerRequests int64 `json:"server_requests"`
	// Dials, when set, is the number of dials the scenario made before
	// recovery.
	Dials *int64 `json:"dials,omitempty"`
	// Fate, when set, is the fate of the faulted request's connection.
	Fate *Fate `json:"fate,omitempty"`
	// HiddenRetry is set when the server must see more requests than the
	// client made attempts.
	HiddenRetry bool `json:"hidden_retry,omitempty"`
	// CancelObserved is set when the server's handler must observe the
	// client going away.
	CancelObserved bool `json:"cancel_observed,omitempty"`
	// Writes, when set, is the number of side effects the server
	// committed (retry write-safety scenarios).
	Writes *int64 `json:"writes,omitempty"`
	// HandlersEntered, when set, is the number of times the server
	// entered the faulted path's handler.
	HandlersEntered *int64 `json:"handlers_entered,omitempty"`
	// ConnsAccepted, when set, is the number of TCP connections a server
	// below HTTP accepted (tls-handshake-stall: the connect succeeded
	// before the handshake stalled).
	ConnsAccepted *int64 `json:"conns_accepted,omitempty"`
	// Leak is set when the scenario's point is a leak that the pool check
	// must find (an unclosed body).
	Leak bool `json:"leak,omitempty"`
	// BlocksOK is set when that leak must block the next request until it
	// is released.
	BlocksOK bool `json:"blocks_ok,omitempty"`
	// BodyAtLeast, when set, is the least time the faulted response's
	// body must have taken (from its first byte to EOF): a trickle's.
	BodyAtLeast time.Duration `json:"body_at_least_ns,omitempty"`
	// BodyBytes, when set, is the number of body bytes the client must
	// have read of the faulted response, exactly: those a fault sent
	// before it cut the body, all of a trickle's, or those the client
	// read before it closed the body early.
	BodyBytes *int64 `json:"body_bytes,omitempty"`
	// OnWarmConn is set when the faulted request must first go on the
	// kept-alive connection the warm-ups left: the fault meets it only
	// there. A client that opens a new one instead did not reuse it.
	OnWarmConn bool `json:"on_warm_conn,omitempty"`
	// FateNetHTTP is set when Fate is net/http's choice among correct
	// ones (drain or close a body closed early, keep or close a connection
	// whose stream was cancelled): another client may choose otherwise,
	// so connaudit serve does not judge it.
	FateNetHTTP bool `json:"fate_net_http,omitempty"`
	// BudgetEnds is set when the retry policy's total budget, not its
	// retries running out, must end the call (A8).
	BudgetEnds bool `json:"budget_ends,omitempty"`
	// Unread, when set, is the number of requests the server closed a
	// connection on without reading them (faultserver's CloseBeforeRead):
	// requests the client sent on a connection already being closed.
	Unread *int64 `json:"unread,omitempty"`
	// Note, when set, is said when the outcome is this one: what the
	// client could have done instead, where both are correct.
	Note string `json:"note,omitempty"`
	// Or, when set, is another outcome a client may give instead, equally
	// correct: a lost connection's error where net/http sends the request
	// again, or the reverse. Its Class, Stage, Status, ServerRequests,
	// Writes, HiddenRetry and Note are that outcome's; a client that gives
	// it passes, its connection's fate and dials unjudged.
	Or *Expect `json:"or,omitempty"`
}

// OrExpect returns the expectation of e's alternative outcome ([Expect.Or]), and
// whether it has one: the counts and class of Or, the fate and dials left
// unchecked (the other outcome takes another connection's path).
func (e Expect) OrExpect() (Expect, bool) {
	if e.Or == nil {
		return Expect{}, false
	}
	a := e
	a.Class, a.Stage, a.Status = e.Or.Class, e.Or.Stage, e.Or.Status
	a.ServerRequests, a.Writes, a.HiddenRetry, a.Note = e.Or.ServerRequests, e.Or.Writes, e.Or.HiddenRetry, e.Or.Note
	a.Fate, a.Dials, a.Unread, a.Or, a.HandlersEntered, a.BodyBytes = nil, nil, nil, nil, nil, nil
	return a, true
}

// Scenario is one fault and what a client must do about it: plain data,
// which the in-process audit ([Runner]) interprets with a Go client and
// connaudit serve gives to a kit of any language, each judging by the same
// [Expect]. A scenario whose fault and steps exist already is one value in
// the list of [Catalogue] (audit/catalogue.go), and nothing else.
type Scenario struct {
	// Name is unique in the catalogue, such as "h2/reset".
	Name string
	// Proto is the protocol it runs over.
	Proto Proto
	// Fault says what the server does; Bound what bounds the client on
	// the reference pool: the catalogue's reference bound, which an
	// audited transport replaces with its own.
	Fault, Bound string
	// Wait is the time the scenario inherently needs (a 150 ms header
	// timeout needs 150 ms): the catalogue's time is measured against the
	// sum of these.
	Wait time.Duration
	// Expect is what must be observed.
	Expect Expect
	// Contract is the retry contract the scenario holds (A1…A10, W1…W4,
	// H1, H2; see [WithRetry]), empty for the scenarios that are not about
	// a retry layer. Each also holds P1, as every scenario does: the same
	// pool serves /ok afterwards with nothing left behind; a scenario whose
	// Contract is P1 holds only that, after the caller's cancel.
	Contract string

	// Serve is what the server does with each request for the faulted
	// URL; nil below HTTP (Listener says what is there instead).
	Serve faultserver.Fault
	// Listener says where the faulted URL is.
	Listener Listener
	// Steps says what the caller does; Warm, for the steps that warm a
	// connection up first, how many warm-up requests it makes (0: one);
	// WarmAside sends them to a URL of their own that answers 200 at once,
	// not to the faulted one (a contract whose bound is short beside a
	// dial on a loaded machine, an attempt limit of 150 ms, is then judged
	// on the attempt, over a kept-alive connection); ReadBytes, for
	// StepsReadThenClose, is how much of the body the caller reads.
	Steps     Steps
	Warm      int
	WarmAside bool
	ReadBytes int
	// Close is how the server closes the warm-up's connection
	// (StepsWarmCloseThenRequest, StepsWarmThenHeldBody): at the caller's
	// asking with a FIN ("fin") or an RST ("rst"), or by itself, the caller
	// waiting for it: its idle timeout ("idle", Serve's IdleClose fault,
	// after Wait) or its keep-alive request limit ("limit", Serve's
	// RequestLimit fault, after the last warm-up's response).
	Close string
	// Settle, when set, has the caller wait, after the faulted call and
	// before /ok, until the client has closed the connection the fault
	// made unusable (a connection gone dark, which only the client's own
	// health check notices), at most the scenario's Wait and a second.
	Settle bool
	// Request is the faulted request; Policy the client's configuration
	// for it.
	Request Request
	Policy  Policy
	// Subject names what a retry contract retries or not, as its verdicts
	// say it ("500", "the POST").
	Subject string
	// Fix says what a client that fails the scenario must do, in the
	// policy's terms (a contract's rule); empty where the fix depends on
	// what was observed (the stage left unbounded, the setting that closed
	// the connection).
	Fix string
	// InProcessOnly, when set, says why the scenario cannot be judged from
	// outside the client's process, so connaudit serve does not serve it;
	// ServedOnly why the in-process audit cannot take its steps with a Go
	// client, so it reports the scenario skipped with that reason.
	InProcessOnly string
	ServedOnly    string
	// Source, when set, is the scenario at the source documents' own
	// numbers, where the catalogue scales them down to save time
	// (connaudit serve -source-numbers).
	Source *Source
}

// Source is a retry contract at the source documents' own numbers.
type Source struct {
	Policy Policy
	// Serve replaces the scenario's fault when the source's differs (its
	// answers after 400 ms, say); Wait is the time the scenario then
	// inherently needs.
	Serve faultserver.Fault
	Wait  time.Duration
}

// Steps says what the caller does in a scenario, through one client (its
// own pool): connaudit serve's kits take the same steps (docs/serve.md).
// After every steps the same client sends GET /ok, which must answer 200.
type Steps string

// The steps of the catalogue's scenarios.
const (
	// StepsRequest: the request; its body read to the end.
	StepsRequest Steps = "request"
	// StepsWarmThenRequest: Warm GETs of the faulted URL (one if Warm is
	// 0), each read and closed, leave a kept-alive connection; then the
	// request.
	StepsWarmThenRequest Steps = "warm-then-request"
	// StepsCancelWhenEntered: the request, cancelled by the caller once
	// the server's handler was entered.
	StepsCancelWhenEntered Steps = "cancel-when-entered"
	// StepsSecondCaller: a first request holds the pool's one connection;
	// a second caller's request must wait for it and be refused after the
	// policy's PoolAcquireTimeout, never reaching the server.
	StepsSecondCaller Steps = "second-caller"
	// StepsReadThenClose: the request; ReadBytes of its body read, then
	// the body closed.
	StepsReadThenClose Steps = "read-then-close"
	// StepsWarmCloseThenRequest: a warm-up GET; the server closes its
	// connection while it is idle (Close), and the caller waits until the
	// server has closed it and seen the client close its side (a second at
	// most); then the request.
	StepsWarmCloseThenRequest Steps = "warm-close-then-request"
	// StepsWarmThenHeldBody: a warm-up GET; then the request with a body
	// the client gets only when it asks for it: at its first asking the
	// server closes the connection the client holds (Close), and that
	// asking never gets the body; a later asking gets it at once.
	StepsWarmThenHeldBody Steps = "warm-then-held-body"
	// StepsCancelWhileWaiting: a first request holds the pool's one
	// connection; a second request is cancelled while it waits for it.
	StepsCancelWhileWaiting Steps = "cancel-while-waiting"
	// StepsLeaveBodyOpen: the request's body is left unread and open
	// while the pool is checked and /ok is sent, then closed.
	StepsLeaveBodyOpen Steps = "leave-body-open"
)

// Warmed reports whether the steps make warm-up requests of the faulted
// URL before the request they report.
func (s Steps) Warmed() bool {
	switch s {
	case StepsWarmThenRequest, StepsWarmCloseThenRequest, StepsWarmThenHeldBody:
		return true
	}
	return false
}

// Listener says where a scenario's faulted URL is.
type Listener string

// The listeners.
const (
	// ListenFault: the scenario's fault server, HTTP/1.1 over TCP for an
	// HTTP1 scenario, HTTPS (h2 and http/1.1 by ALPN) for an HTTP2 one.
	ListenFault Listener = "fault"
	// ListenRawHTTP2: HTTPS with faultserver's raw HTTP/2 server, for the
	// faults only it can produce (GOAWAY, RST_STREAM).
	ListenRawHTTP2 Listener = "raw-h2"
	// ListenTLSStall: TCP accepted, the TLS handshake never answered.
	ListenTLSStall Listener = "tls-stall"
	// ListenConnectHang: a listener whose accept queue is full, so that a
	// connect hangs.
	ListenConnectHang Listener = "connect-hang"
	// ListenClosedPort: nothing listens.
	ListenClosedPort Listener = "closed-port"
)

// BelowHTTP reports whether no HTTP server is behind the listener.
func (l Listener) BelowHTTP() bool {
	return l == ListenTLSStall || l == ListenConnectHang || l == ListenClosedPort
}

// Request is a scenario's faulted request.
type Request struct {
	// Method is GET when empty.
	Method string
	// Body, when set, is sent with Content-Type: application/json.
	Body string
	// IdempotencyKey, when set, is the Idempotency-Key header; with
	// KeyPerAttempt every attempt gets a new one instead
	// (IdempotencyKey-attempt-1, -2, …), as a client that makes the key
	// inside its retry loop does.
	IdempotencyKey string
	KeyPerAttempt  bool
	// Reported, when set, is the body the caller must read in a 200: what
	// the server reported of its writes.
	Reported string
}

// method returns the request's method.
func (r Request) method() string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// Policy is a scenario's whole client configuration: the bounds of its
// call and, for a retry contract, the retry layer's rules. The reference
// pool and package retry apply it in process; connaudit serve gives it to
// a kit in plain numbers. Zero means not set.
type Policy struct {
	// Policy is the retry layer's, for a retry contract: only a 503 is
	// retried (its Retryable is nil), a GET or HEAD replayed, a POST only
	// as UnsafeRetryNonIdempotent or RetryIdempotencyKey allow. For any
	// other scenario only its AttemptTimeout may be set: the caller's
	// deadline for the call.
	retry.Policy
	// ReadTimeout is the read interval: the longest wait for the response
	// headers and between two reads of the body (on the reference pool,
	// ResponseHeaderTimeout and pool.BodyIdleTimeout).
	ReadTimeout time.Duration
	// ConnectTimeout bounds the TCP connect; TLSTimeout the TLS handshake.
	ConnectTimeout time.Duration
	TLSTimeout     time.Duration
	// PoolMaxPerHost and PoolAcquireTimeout make a pool of that many
	// connections per host whose callers wait at most that long for one.
	PoolMaxPerHost     int
	PoolAcquireTimeout time.Duration
	// SendPingTimeout and PingTimeout are HTTP/2's health check
	// (http.HTTP2Config): a PING after that long without a frame read, and
	// the connection closed when its answer takes longer than PingTimeout.
	SendPingTimeout time.Duration
	PingTimeout     time.Duration
}

// env is what a scenario runs with.
type env struct {
	// Server is the scenario's fault server.
	Server *faultserver.Server
	// Pool is the pool under audit; Client sends through it.
	Pool   *pool.Pool
	Client *http.Client
	// Target is the base URL of the faulted requests: the server's, or a
	// listener below HTTP.
	Target string
	// scenario is the scenario run; serverConns the server's connections
	// that carried requests for the fault path.
	scenario    *Scenario
	serverConns *serverConns

	collector *httptrace.Collector
	signals   *signals
	progress  *progress // the faulted path's attempts in flight, for the guard
	mark      uint64    // timelines with a larger id belong to the faulted request
	obs       *Observed
	cleanups  []func()
	counters  faultserver.Counters // the fault path's counters at the mark
	keys      int                  // idempotency keys the fault path had received at the mark
	retries   int                  // attempts the reference retry policy made, -1 if none
	label     string               // the pprof label of the scenario's run
	accepted  func() int64         // connections a server below HTTP accepted, if there is one

	retry   RetryFunc // the retry layer of a contract
	called  bool      // the retry layer was called
	callErr error     // and returned this error
}

// faultPath is the path of every faulted request.
const faultPath = "/fault"

// okPath is the path of the recovery request.
const okPath = "/ok"

// url returns the faulted URL.
func (e *env) url() string { return e.Target + faultPath }

// markFaulted starts the faulted request: earlier timelines are warm-ups.
func (e *env) markFaulted() {
	for _, tl := range e.collector.Timelines() {
		e.mark = max(e.mark, tl.ID)
	}
	if e.progress != nil {
		e.mark = max(e.mark, e.progress.latest())
	}
	if e.Server != nil {
		e.counters = e.Server.Counters(faultPath)
		e.keys = len(e.Server.IdempotencyKeys(faultPath))
	}
}

// get sends a GET for the faulted URL with ctx.
func (e *env) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return e.Client.Do(req)
}

// Catalogue returns every scenario, HTTP/1.1 first, then HTTP/2, then the
// retry contracts.
func Catalogue() []Scenario {
	var all []Scenario
	all = append(all, http1Scenarios()...)
	all = append(all, http2Scenarios()...)
	all = append(all, retryScenarios()...)
	for i := range all {
		s := &all[i]
		if s.Steps == "" {
			s.Steps = StepsRequest
		}
		if s.Listener == "" {
			s.Listener = ListenFault
		}
	}
	return all
}

// Select returns the scenarios whose name matches the regular expression
// run ("" matches all) and not skip ("" skips none), over one of protos
// (none given: any), as go test's -run and -skip select tests:
//
//	audit.Select(audit.Catalogue(), "", `trickle`, audit.HTTP1)
//
// A pattern that does not compile, a protocol not in the catalogue, or a
// selection that keeps no scenario is an error.
func Select(scenarios []Scenario, run, skip string, protos ...Proto) ([]Scenario, error) {
	runRE, err := compilePattern("run", run)
	if err != nil {
		return nil, err
	}
	skipRE, err := compilePattern("skip", skip)
	if err != nil {
		return nil, err
	}
	for _, p := range protos {
		if p != HTTP1 && p != HTTP2 {
			return nil, fmt.Errorf("audit: unknown protocol %q (want %q or %q)", p, HTTP1, HTTP2)
		}
	}
	var out []Scenario
	for _, s := range scenarios {
		switch {
		case runRE != nil && !runRE.MatchString(s.Name),
			skipRE != nil && skipRE.MatchString(s.Name),
			len(protos) > 0 && !slices.Contains(protos, s.Proto):
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("audit: no scenario is selected by %s", describeSelection(run, skip, protos))
	}
	return out, nil
}

func compilePattern(name, pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("audit: bad %s pattern: %w", name, err)
	}
	return re, nil
}

func describeSelection(run, skip string, protos []Proto) string {
	var parts []string
	if run != "" {
		parts = append(parts, fmt.Sprintf("run %q", run))
	}
	if skip != "" {
		parts = append(parts, fmt.Sprintf("skip %q", skip))
	}
	if len(protos) > 0 {
		parts = append(parts, fmt.Sprintf("protocols %v", protos))
	}
	if len(parts) == 0 {
		return "an empty list"
	}
	return strings.Join(parts, ", ")
}

// Names returns the names of scenarios.
func Names(scenarios []Scenario) []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.Name
	}
	return out
}
