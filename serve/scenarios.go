package serve

import (
	"net/http"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/vocab"
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

// spec is one scenario of the catalogue as the server serves and judges
// it: the catalogue's data, and what follows from it for a kit.
type spec struct {
	audit.Scenario
	on      listener
	fault   faultserver.Fault // at the source's numbers where asked for
	wait    time.Duration
	policy  Policy
	request Request
	caller  Expectation
}

// catalogue builds the served scenarios from the audit's catalogue, in its
// order, leaving out those only an in-process audit can judge; with
// sourceNumbers the scenarios that have the source documents' own numbers
// are served at them ([SourceNumbers]).
func catalogue(sourceNumbers bool) []*spec {
	var out []*spec
	for _, s := range audit.Catalogue() {
		if s.InProcessOnly != "" {
			continue
		}
		out = append(out, served(s, sourceNumbers))
	}
	return out
}

// served is s as the server serves it.
func served(s audit.Scenario, sourceNumbers bool) *spec {
	sp := &spec{Scenario: s, fault: s.Serve, wait: s.Wait}
	if sourceNumbers && s.Source != nil {
		s.Policy = s.Source.Policy
		if s.Source.Serve != nil {
			sp.fault = s.Source.Serve
		}
		if s.Source.Wait > 0 {
			sp.wait = s.Source.Wait
		}
	}
	sp.policy = policyOf(s.Policy, s.Contract != "")
	sp.on = listenerOf(s)
	sp.request = requestOf(s.Request)
	sp.caller = callerOf(s.Expect)
	if a := s.Expect.Or; a != nil {
		// An alternative the kit's words cannot tell from the first
		// (two classes of timeout) is not one to the kit.
		if or := callerOf(audit.Expect{Class: a.Class, Stage: a.Stage, Status: a.Status}); or != sp.caller {
			sp.caller.Or = &or
		}
	}
	// The attempts go with either outcome: they are the scenario's.
	sp.caller.Attempts = max(1, s.Expect.ClientAttempts)
	if sp.caller.Or != nil {
		sp.caller.Or.Attempts = sp.caller.Attempts
	}
	return sp
}

// listenerOf says where s's faulted URL is served.
func listenerOf(s audit.Scenario) listener {
	switch s.Listener {
	case audit.ListenRawHTTP2:
		return onRawH2
	case audit.ListenTLSStall:
		return onTLSStall
	case audit.ListenConnectHang:
		return onConnectHang
	case audit.ListenClosedPort:
		return onClosedPort
	}
	if s.Proto == audit.HTTP2 {
		return onTLS
	}
	return onPlain
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// policyOf states p in the protocol's plain numbers: a retry contract's
// retry layer retries 503 only and replays GET and HEAD (and a POST as its
// policy allows); any other scenario's client retries nothing.
func policyOf(p audit.Policy, contract bool) Policy {
	out := Policy{AttemptTimeoutMS: ms(p.AttemptTimeout), TotalTimeoutMS: ms(p.TotalTimeout), MaxRetries: p.MaxRetries,
		DelayMS: ms(p.Delay), RetryStatuses: []int{}, RetryMethods: []string{},
		RetryWithIdempotencyKey: p.RetryIdempotencyKey, RetryAnyMethod: p.UnsafeRetryNonIdempotent,
		ConnectTimeoutMS: ms(p.ConnectTimeout), ReadTimeoutMS: ms(p.ReadTimeout), TLSTimeoutMS: ms(p.TLSTimeout),
		PoolMaxPerHost: p.PoolMaxPerHost, PoolAcquireTimeoutMS: ms(p.PoolAcquireTimeout),
		SendPingTimeoutMS: ms(p.SendPingTimeout), PingTimeoutMS: ms(p.PingTimeout)}
	if contract {
		out.RetryStatuses = []int{http.StatusServiceUnavailable}
		out.RetryMethods = []string{http.MethodGet, http.MethodHead}
	}
	return out
}

// requestOf states r as the protocol's request.
func requestOf(r audit.Request) Request {
	out := Request{Method: r.Method, Headers: map[string]string{}, Body: r.Body}
	if out.Method == "" {
		out.Method = http.MethodGet
	}
	switch {
	case r.KeyPerAttempt:
		out.KeyPerAttempt = r.IdempotencyKey
	case r.IdempotencyKey != "":
		out.Headers["Idempotency-Key"] = r.IdempotencyKey
	}
	return out
}

// callerOf is what the caller must be given for e's outcome, as a kit
// reports it: a status, or an error of a kind. A deadline while waiting
// for the pool is the pool's refusal (a client's acquire timeout; in
// process, the caller's deadline stands for it).
func callerOf(e audit.Expect) Expectation {
	switch {
	case e.Class == vocab.ClassOK:
		return Expectation{Status: e.Status}
	case e.Stage == vocab.StagePoolWait && e.Class == vocab.ClassDeadline:
		return Expectation{Error: KindPool}
	case e.Class == vocab.ClassCanceled:
		return Expectation{Error: KindCanceled}
	case timeoutClass(e.Class):
		return Expectation{Error: KindTimeout}
	}
	return Expectation{Error: KindConnection}
}

// timeoutClass reports whether c is a timeout of one of the client's
// bounds.
func timeoutClass(c vocab.Class) bool {
	switch c {
	case vocab.ClassTimeout, vocab.ClassDeadline, vocab.ClassResponseHeaderTimeout, vocab.ClassBodyIdleTimeout,
		vocab.ClassTLSHandshakeTimeout, vocab.ClassConnectTimeout:
		return true
	}
	return false
}
