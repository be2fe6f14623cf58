package serve

import (
	"fmt"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"golang.org/x/net/http2"
)

// listener says where a scenario's faulted URL is.
type listener int

const (
	onPlain       listener = iota // HTTP/1.1 over TCP
	onTLS                         // HTTPS, HTTP/1.1 and h2 by ALPN
	onRawH2                       // HTTPS, the raw HTTP/2 server (GOAWAY, RST_STREAM)
	onTLSStall                    // TCP accepted, the handshake never answered (one per session)
	onConnectHang                 // a full accept queue (one per session)
	onClosedPort                  // nothing listens
)

// spec is one scenario as the server serves and judges it.
type spec struct {
	name, contract string
	proto          audit.Proto
	faultText      string
	fault          faultserver.Fault // nil below HTTP
	on             listener
	steps          Steps
	// close is how the server closes the kept-alive connection when the
	// kit asks (close_url): "fin" or "rst"; held is set when the kit
	// asks with the request's body held (warm-then-held-body).
	close     string
	held      bool
	request   Request
	policy    Policy
	readBytes int
	wait      time.Duration
	// caller is what the caller must be given; either lets a hidden
	// replay (200) or its absence (a connection error) stand.
	caller Expectation
	either bool
	// audit is the catalogue's expectation of the Go client, for the
	// server's counts; timeoutClass and connClass the audit's class of a
	// timeout, and of a connection error, in this scenario, at stage.
	audit        audit.Expect
	timeoutClass vocab.Class
	connClass    vocab.Class
	stage        vocab.Stage
	subject      string
	judgeFate    bool
}

// NotServed lists the catalogue's scenarios that cannot be judged from
// outside the client's process, and why.
var NotServed = map[string]string{
	"unclosed-body":           "a leak inside the client's process: only an in-process pool check sees the open body",
	"h2/unclosed-body":        "a leak inside the client's process: only an in-process pool check sees the open body",
	"cancel-waiting-for-conn": "a kit cannot tell when its call waits for the pool; pool-acquire-timeout judges the pool of one",
}

// The catalogue's bounds, as the serve policy states them.
const (
	catBound     = 150 * time.Millisecond
	readInterval = 250 * time.Millisecond // the contracts' read interval (A7, A10), the source's responseTimeout
	trickleIdle  = time.Second
	acquireBound = time.Second // the chapter's pendingAcquireTimeout
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// catalogue builds the served scenarios from the audit's catalogue, in its
// order, with the scenarios served only here after the HTTP/1 ones; with
// sourceNumbers the retry contracts the catalogue scales down are at the
// source's own numbers ([SourceNumbers]).
func catalogue(sourceNumbers bool) ([]*spec, error) {
	var out []*spec
	for _, s := range audit.Catalogue() {
		if _, skip := NotServed[s.Name]; skip {
			continue
		}
		sp, err := fromAudit(s)
		if err != nil {
			return nil, err
		}
		if sourceNumbers {
			atSourceNumbers(sp)
		}
		out = append(out, sp)
		switch s.Name {
		case "connect-refused":
			out = append(out, poolAcquire(), idleClose(), heldBody("reset-before-send", "rst"), heldBody("close-before-send", "fin"))
		case "retry/hidden-retry":
			out = append(out, hiddenRetryReset(sp))
		}
	}
	return out, nil
}

// atSourceNumbers sets a retry contract the catalogue scales down to the
// source's own numbers: the article's A6, A8 and A9.
func atSourceNumbers(sp *spec) {
	p := &sp.policy
	switch sp.contract {
	case "A6":
		p.AttemptTimeoutMS = 1000
	case "A8":
		p.AttemptTimeoutMS, p.TotalTimeoutMS, p.DelayMS = 1000, 1500, 1000
		sp.wait = 1500 * time.Millisecond
	case "A9":
		p.AttemptTimeoutMS, p.TotalTimeoutMS, p.DelayMS = 500, 2000, 200
		after := 400 * time.Millisecond
		sp.fault = faultserver.Sequence{Faults: []faultserver.Fault{faultserver.Status{Code: 503, After: after}, faultserver.Status{Code: 200, After: after}}}
		sp.wait = 2 * after
	}
}

// idleClose is a kept-alive connection the server closes (FIN) while it is
// idle, before the client's next request: the kit waits until the server
// has closed it (and seen the client close its side, or waited a second
// for it), then sends the request, which must come on a new connection.
func idleClose() *spec {
	return &spec{name: "idle-close", proto: audit.HTTP1, faultText: "closes (FIN) the kept-alive connection while it is idle, before the next request",
		fault: faultserver.OK{}, on: onPlain, steps: StepsWarmCloseThenRequest, close: "fin", request: get(), policy: noRetry(),
		caller: Expectation{Status: 200}, audit: audit.Expect{Class: vocab.ClassOK, ClientAttempts: 1, ServerRequests: 1}}
}

// heldBody is a kept-alive connection the server closes (how: "rst" or
// "fin") while the client holds it for a POST it has not written yet: the
// kit gives the client the request's body only when the client asks for
// it, and asks the server to close the connection when the client first
// does. Nothing of the request reached the server; the loss must reach the
// caller, not be hidden by a send on a new connection (Reactor Netty's own
// retry, which disableRetry(true) turns off, does exactly that after an
// RST).
func heldBody(name, how string) *spec {
	text := map[string]string{"rst": "resets (RST)", "fin": "closes (FIN)"}[how]
	return &spec{name: name, proto: audit.HTTP1, faultText: text + " the kept-alive connection the client holds for a POST not yet written",
		fault: faultserver.OK{}, on: onPlain, steps: StepsWarmThenHeldBody, close: how, held: true,
		request: Request{Method: http.MethodPost, Headers: map[string]string{}, Body: `{"order":7}`}, policy: noRetry(),
		caller: Expectation{Error: KindConnection}, connClass: map[string]vocab.Class{"rst": vocab.ClassReset, "fin": vocab.ClassServerClosed}[how],
		audit: audit.Expect{Class: map[string]vocab.Class{"rst": vocab.ClassReset, "fin": vocab.ClassServerClosed}[how], ClientAttempts: 1, ServerRequests: 0}}
}

// hiddenRetryReset is H1 with an RST for the FIN: the kept-alive
// connection reset right after the server read the request.
func hiddenRetryReset(h1 *spec) *spec {
	sp := *h1
	sp.name, sp.faultText = "retry/hidden-retry-reset", "resets (RST) a kept-alive connection after reading its 2nd request"
	sp.fault, sp.connClass = faultserver.Reset{After: 1}, vocab.ClassReset
	return &sp
}

// poolAcquire is the pool of one: a second caller waits for the one
// connection, busy with a request the server holds, and is refused after
// the pool's acquire timeout, never reaching the server.
func poolAcquire() *spec {
	return &spec{name: "pool-acquire-timeout", proto: audit.HTTP1,
		faultText: "the one connection is held by a request the server never answers", fault: faultserver.OK{},
		on: onPlain, steps: StepsSecondCaller, request: get(),
		policy: Policy{PoolMaxPerHost: 1, PoolAcquireTimeoutMS: ms(acquireBound), RetryStatuses: []int{}, RetryMethods: []string{}},
		wait:   acquireBound, caller: Expectation{Error: KindPool},
		audit:        audit.Expect{Class: classPool, Stage: vocab.StagePoolWait, ClientAttempts: 1, ServerRequests: 0},
		timeoutClass: vocab.ClassDeadline, stage: vocab.StagePoolWait}
}

func get() Request { return Request{Method: http.MethodGet, Headers: map[string]string{}} }

// noRetry is the policy of a scenario that is not a retry contract: no
// retry, and no bound but the scenario's own.
func noRetry() Policy { return Policy{RetryStatuses: []int{}, RetryMethods: []string{}} }

func fromAudit(s audit.Scenario) (*spec, error) {
	sp := &spec{name: s.Name, contract: s.Contract, proto: s.Proto, faultText: s.Fault, on: onPlain,
		steps: StepsRequest, request: get(), policy: noRetry(), wait: s.Wait, audit: s.Expect,
		stage: s.Expect.Stage, subject: s.Subject(), judgeFate: s.Contract == ""}
	if s.Proto == audit.HTTP2 {
		sp.on = onTLS
	}
	if p, ok := s.RetryPolicy(); ok {
		sp.policy = Policy{AttemptTimeoutMS: ms(p.AttemptTimeout), TotalTimeoutMS: ms(p.TotalTimeout),
			MaxRetries: p.MaxRetries, DelayMS: ms(p.Delay), RetryStatuses: []int{http.StatusServiceUnavailable},
			RetryMethods: []string{http.MethodGet, http.MethodHead}, RetryWithIdempotencyKey: p.RetryIdempotencyKey,
			RetryAnyMethod: p.UnsafeRetryNonIdempotent}
	}
	base := s.Name
	if s.Proto == audit.HTTP2 {
		base = s.Name[len("h2/"):]
	}
	hang := func(read, attempt time.Duration, class vocab.Class) {
		sp.fault = faultserver.Hang{}
		if read > 0 {
			sp.policy.ReadTimeoutMS = ms(read)
		}
		if attempt > 0 {
			sp.policy.AttemptTimeoutMS = ms(attempt)
		}
		sp.caller, sp.timeoutClass = Expectation{Error: KindTimeout}, class
	}
	status := func(code int) {
		sp.fault, sp.caller = faultserver.Status{Code: code}, Expectation{Status: code}
	}
	seq := func(f ...faultserver.Fault) faultserver.Fault { return faultserver.Sequence{Faults: f} }
	s503 := faultserver.Status{Code: http.StatusServiceUnavailable}
	writes := seq(faultserver.Write{Status: 503}, faultserver.Write{Status: 200, Report: true})
	post := func(key string) {
		sp.request = Request{Method: http.MethodPost, Headers: map[string]string{}, Body: `{"order":7}`}
		if key != "" {
			sp.request.Headers["Idempotency-Key"] = key
		}
		sp.fault = writes
	}
	switch base {
	case "ok", "retry/immediate-success":
		sp.fault, sp.caller = faultserver.OK{}, Expectation{Status: 200}
	case "status-503", "retry/always-503", "retry/total-budget":
		status(503)
	case "status-500", "retry/500":
		status(500)
	case "status-404", "retry/404":
		status(404)
	case "retry/503-503-ok":
		sp.fault, sp.caller = seq(s503, s503, faultserver.OK{}), Expectation{Status: 200}
	case "retry/attempt-limit-restarts":
		sp.fault = seq(faultserver.Status{Code: 503, After: 150 * time.Millisecond}, faultserver.Status{Code: 200, After: 150 * time.Millisecond})
		sp.caller = Expectation{Status: 200}
	case "response-header-timeout", "retry/response-header-timeout":
		hang(catBound, 0, vocab.ClassResponseHeaderTimeout)
	case "attempt-deadline", "retry/attempt-deadline":
		hang(0, 0, vocab.ClassDeadline)
		if s.Contract == "" {
			sp.policy.AttemptTimeoutMS = ms(catBound)
		}
	case "retry/cancel-in-attempt":
		sp.fault, sp.steps, sp.caller = faultserver.Hang{}, StepsCancelWhenEntered, Expectation{Error: KindCanceled}
	case "retry/fresh-connection-closed":
		sp.fault, sp.caller, sp.connClass = faultserver.CloseBeforeResponse{}, Expectation{Error: KindConnection}, vocab.ClassServerClosed
	case "retry/body-read-interval":
		sp.fault = faultserver.StallMidBody{Length: 10000, Send: 1000}
		sp.policy.ReadTimeoutMS = ms(readInterval)
		sp.caller, sp.timeoutClass, sp.stage = Expectation{Error: KindTimeout}, vocab.ClassBodyIdleTimeout, vocab.StageBody
	case "cancel-in-handler":
		sp.fault, sp.steps, sp.caller = faultserver.Hang{}, StepsCancelWhenEntered, Expectation{Error: KindCanceled}
		// Over HTTP/2 a cancelled stream leaves the connection to the
		// client's choice (and a kit that can cancel only by stopping the
		// client's process, curl's, closes it): the cancel the server
		// sees, the one handler entry and /ok are the point.
		sp.judgeFate = s.Proto == audit.HTTP1
	case "close-before-response":
		sp.fault, sp.caller, sp.connClass = faultserver.CloseBeforeResponse{}, Expectation{Error: KindConnection}, vocab.ClassServerClosed
	case "hidden-retry", "retry/hidden-retry":
		sp.fault, sp.steps, sp.either = faultserver.CloseBeforeResponse{After: 1}, StepsWarmThenRequest, true
		sp.caller, sp.connClass, sp.judgeFate = Expectation{Status: 200}, vocab.ClassServerClosed, false
	case "reset":
		sp.fault, sp.caller, sp.connClass = faultserver.Reset{}, Expectation{Error: KindConnection}, vocab.ClassReset
		if s.Proto == audit.HTTP2 {
			sp.connClass = vocab.ClassStreamReset
		}
	case "close-mid-body":
		sp.fault = faultserver.CloseMidBody{Length: 10000, Send: 1000}
		sp.caller, sp.connClass, sp.stage = Expectation{Error: KindConnection}, vocab.ClassBodyTruncated, vocab.StageBody
		if s.Proto == audit.HTTP2 {
			sp.connClass = vocab.ClassStreamReset
		}
	case "stall-mid-body":
		sp.fault = faultserver.StallMidBody{Length: 10000, Send: 5000}
		sp.policy.ReadTimeoutMS = ms(catBound)
		sp.caller, sp.timeoutClass, sp.stage = Expectation{Error: KindTimeout}, vocab.ClassBodyIdleTimeout, vocab.StageBody
	case "trickle-body":
		sp.fault = faultserver.Trickle{Bytes: 25, Interval: 50 * time.Millisecond}
		sp.policy.ReadTimeoutMS = ms(trickleIdle)
		sp.caller = Expectation{Status: 200}
	case "early-body-close":
		sp.fault, sp.steps, sp.readBytes = faultserver.LargeBody{Size: 1 << 20}, StepsReadThenClose, 10
		sp.caller, sp.judgeFate = Expectation{Status: 200}, false // whether a client drains or closes is its choice
	case "connection-close":
		sp.fault, sp.caller = faultserver.ConnectionClose{}, Expectation{Status: 200}
	case "tls-handshake-stall":
		sp.on, sp.caller, sp.timeoutClass = onTLSStall, Expectation{Error: KindTimeout}, vocab.ClassTLSHandshakeTimeout
		sp.judgeFate = false // the connection is the pool's: the server below TLS counts it (conns_accepted)
		sp.policy.TLSTimeoutMS = ms(catBound)
	case "connect-hang":
		sp.on, sp.caller, sp.timeoutClass = onConnectHang, Expectation{Error: KindTimeout}, vocab.ClassConnectTimeout
		sp.policy.ConnectTimeoutMS = ms(catBound)
	case "connect-refused":
		sp.on, sp.caller, sp.connClass = onClosedPort, Expectation{Error: KindConnection}, vocab.ClassConnectRefused
	case "goaway":
		sp.on, sp.fault = onRawH2, seq(faultserver.GoAway{}, faultserver.OK{})
		sp.caller, sp.either, sp.connClass, sp.judgeFate = Expectation{Status: 200}, true, vocab.ClassGoAway, false
	case "refused-stream":
		sp.on = onRawH2
		sp.fault = seq(faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{})
		sp.caller, sp.either, sp.connClass, sp.judgeFate = Expectation{Status: 200}, true, vocab.ClassStreamReset, false
	case "retry/post-unsafe", "retry/post-not-retried":
		post("")
		sp.caller = Expectation{Status: s.Expect.Status}
	case "retry/post-idempotency-key":
		post("order-7")
		sp.caller = Expectation{Status: 200}
	case "retry/post-key-per-attempt":
		post("")
		sp.request.KeyPerAttempt = "order-7"
		sp.caller = Expectation{Status: 200}
	default:
		return nil, fmt.Errorf("serve: the catalogue's scenario %q has no served form", s.Name)
	}
	if s.Name == "retry/total-budget" {
		sp.caller, sp.timeoutClass = Expectation{Error: KindTimeout}, vocab.ClassDeadline
	}
	if s.Name == "retry/response-header-timeout" {
		sp.policy.ReadTimeoutMS = ms(readInterval)
	}
	return sp, nil
}
