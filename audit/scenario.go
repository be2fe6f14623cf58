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
}

// Scenario is one fault and the client bound that must contain it.
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
	// Bounds are the pool options that bound the faulted stage on the
	// reference pool. A caller-supplied transport keeps its own.
	Bounds []pool.Option
	// Contract is the retry contract the scenario holds (A1…A10, W1…W4,
	// H1, H2; see [WithRetry]), empty for the scenarios that are not about
	// a retry layer. Each also holds P1, as every scenario does: the same
	// pool serves /ok afterwards with nothing left behind; a scenario whose
	// Contract is P1 holds only that, after the caller's cancel.
	Contract string

	server []faultserver.Option
	setup  func(e *Env) error
	drive  func(ctx context.Context, e *Env) error
	policy retry.Policy // a contract's policy, given to the retry layer
	// subject names what a contract retries or not, for its verdicts
	// ("500", "the POST").
	subject string
}

// Env is what a scenario runs with.
type Env struct {
	// Server is the scenario's fault server.
	Server *faultserver.Server
	// Pool is the pool under audit; Client sends through it.
	Pool   *pool.Pool
	Client *http.Client
	// Target is the base URL of the faulted requests: the server's, or a
	// listener below HTTP.
	Target string

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
func (e *Env) url() string { return e.Target + faultPath }

// markFaulted starts the faulted request: earlier timelines are warm-ups.
func (e *Env) markFaulted() {
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
func (e *Env) get(ctx context.Context, u string) (*http.Response, error) {
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
