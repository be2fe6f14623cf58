package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// Runner runs scenarios. Build it with [NewRunner].
type Runner struct {
	transport     func() *http.Transport
	roundTripper  func() http.RoundTripper // WithRoundTripper's; transport is then nil
	transportName string
	poolOpts      []pool.Option
	meant         *http.Protocols // nil: either, as the transport speaks
	guard         time.Duration
	parallel      int
	parallelSet   bool // Parallel was given: a caller's retry layer's contracts run at once too
	recovery      time.Duration
	progress      func(Result)
	retryName     string
	retryRow      string // retryDefaults or retryConfigured
	retryLayer    func(retry.Policy) (RetryFunc, error)
	serverIdle    time.Duration
}

// Option configures a [Runner].
type Option interface {
	apply(*Runner) error
}

type optionFunc func(*Runner) error

func (f optionFunc) apply(r *Runner) error { return f(r) }

// WithTransport audits the transport that newTransport returns (called once
// per scenario, and once more by [Runner.Run] to read its protocols)
// instead of the reference pool: the configuration a team ships, with its
// own timeouts or their absence. The runner tracks a clone of it
// ([pool.Track]) capped at one connection per host and trusting the fault
// server's certificate; the scenarios' own bounds are not applied, so a
// stage the transport does not bound fails as "unbounded", with the
// setting that bounds it in [Result.Fix]. name labels the report. poolOpts
// are applied to the tracked pool, for what a service sets there rather
// than on the transport, such as [pool.BodyIdleTimeout]: no http.Transport
// field bounds a stalled body, so without it the stall-mid-body scenarios
// report that stage unbounded.
//
// The transport speaks HTTP/2 in the h2 scenarios when it would in
// service, by net/http's rules; see [Protocols] for the scenarios of a
// protocol it cannot speak.
func WithTransport(name string, newTransport func() *http.Transport, poolOpts ...pool.Option) Option {
	return optionFunc(func(r *Runner) error {
		if newTransport == nil {
			return errors.New("audit: nil transport factory")
		}
		r.transport, r.roundTripper, r.transportName, r.poolOpts = newTransport, nil, name, poolOpts
		return nil
	})
}

// RetryFunc performs req with c, retrying as the retry layer under audit
// does, and returns what the caller gets: the response, whose body the
// runner reads and closes, or the error. [retry.Policy.Do] has this shape.
type RetryFunc func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error)

// WithRetry audits the caller's retry layer instead of package retry in
// the retry contracts (the scenarios with a [Scenario].Contract): whatever
// performs a request with its retries, over the client the runner gives it
// (the audited pool's; it must send every attempt through that client, so
// that each round trip is counted as an attempt). name labels the report.
//
// For each contract the runner calls configure with the contract's policy
// as a [retry.Policy] — AttemptTimeout (one attempt, through reading the
// body), TotalTimeout (all attempts and delays), MaxRetries, a fixed Delay,
// Retryable nil meaning "503 only", and which methods may be replayed
// (UnsafeRetryNonIdempotent, RetryIdempotencyKey) — and runs the RetryFunc
// it returns once. configure sets the layer as closely to the policy as
// the layer allows; when the layer has no equivalent of a setting the
// contract needs, configure returns an error saying which, and the
// contract is reported not configurable ([Result.NotConfigurable]) rather
// than failed. The reference, used without this option, is
//
//	func(p retry.Policy) (audit.RetryFunc, error) { return p.Do, nil }
func WithRetry(name string, configure func(p retry.Policy) (RetryFunc, error)) Option {
	return optionFunc(func(r *Runner) error {
		if configure == nil {
			return errors.New("audit: nil retry layer")
		}
		if name == "" {
			return errors.New("audit: the retry layer needs a name")
		}
		r.retryName, r.retryLayer = name, configure
		return nil
	})
}

// WithRetryTransport audits a retry layer written as an
// http.RoundTripper — the most common shape in Go services — instead of
// package retry in the retry contracts, as [WithRetry] does for one
// written as a function. For each contract the runner calls configure
// with the RoundTripper below the layer (the audited pool's, which counts
// every round trip as an attempt) and the contract's [retry.Policy], and
// sends the contract's request through an http.Client whose Transport is
// the RoundTripper configure returns. configure sets the layer as closely
// to the policy as the layer allows; an error says which setting it has no
// equivalent of, and the contract is reported not configurable, not failed.
// Every contract's policy sets MaxRetries, Delay, AttemptTimeout (each
// attempt, through reading its body) and TotalTimeout (attempts and
// delays); W1 adds UnsafeRetryNonIdempotent, W2 and W3
// RetryIdempotencyKey. Which field a contract turns on is in docs/retry.md.
//
//	audit.WithRetryTransport("ours", func(base http.RoundTripper, p retry.Policy) (http.RoundTripper, error) {
//		if p.UnsafeRetryNonIdempotent || p.RetryIdempotencyKey {
//			return nil, errors.New("never replays a POST") // not configurable
//		}
//		return &ourRetrier{next: base, retries: p.MaxRetries, delay: p.Delay,
//			perTry: p.AttemptTimeout, budget: p.TotalTimeout}, nil
//	})
//
// A layer that has no settings to give it is audited as it comes with
// [RetryAtDefaults].
func WithRetryTransport(name string, configure func(base http.RoundTripper, p retry.Policy) (http.RoundTripper, error)) Option {
	return optionFunc(func(r *Runner) error {
		if configure == nil {
			return errors.New("audit: nil retry layer")
		}
		if name == "" {
			return errors.New("audit: the retry layer needs a name")
		}
		r.retryName = name
		r.retryLayer = func(p retry.Policy) (RetryFunc, error) {
			base := &below{}
			rt, err := configure(base, p)
			if err != nil {
				return nil, err
			}
			if rt == nil {
				return nil, errors.New("the retry layer's configure returned no RoundTripper")
			}
			return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
				base.rt = c.Transport
				client := *c
				client.Transport = rt
				return client.Do(req.WithContext(ctx))
			}, nil
		}
		return nil
	})
}

// below is the RoundTripper a retry layer under audit is built on: the
// client's of the call it makes, known once the call is made.
type below struct{ rt http.RoundTripper }

func (b *below) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.rt == nil {
		return nil, errors.New("audit: the retry layer made a round trip outside the call")
	}
	return b.rt.RoundTrip(req)
}

// Protocols says which protocols the client under audit is meant to speak:
// HTTP/1 only (p has HTTP1), HTTP/2 only (HTTP2), or both (HTTP1 and
// HTTP2, as http.DefaultTransport speaks: HTTP/2 where the server offers
// it, HTTP/1 elsewhere). UnencryptedHTTP2 is ignored: no scenario runs it.
//
// Scenarios over a protocol not meant are reported skipped, not failed
// ("HTTP/2 is not meant"). A protocol meant that the transport cannot
// speak is a finding ([Report.Findings]) that names why — a DialContext,
// DialTLSContext or TLSClientConfig of its own without ForceAttemptHTTP2,
// a non-nil TLSNextProto, Protocols without it, GODEBUG http2client=0 —
// and the fix; its scenarios are skipped. Without this option either
// protocol will do: the scenarios of a protocol the transport cannot speak
// are skipped with that reason and fix, and no finding is made.
func Protocols(p http.Protocols) Option {
	return optionFunc(func(r *Runner) error {
		if !p.HTTP1() && !p.HTTP2() {
			return errors.New("audit: Protocols allows neither HTTP1 nor HTTP2")
		}
		var m http.Protocols
		m.SetHTTP1(p.HTTP1())
		m.SetHTTP2(p.HTTP2())
		r.meant = &m
		return nil
	})
}

// GuardDeadline sets the longest bound of the client's that the runner
// waits for: 10s by default. No bound of the client's is ever judged by
// racing it:
//
//   - A bound the runner sees — the transport's DialContext as a
//     net.Dialer's with its Timeout, TLSHandshakeTimeout,
//     ResponseHeaderTimeout, pool options after the factory such as
//     pool.BodyIdleTimeout, and package retry's budgets in the retry
//     contracts — is waited for from when its clock starts, and half as
//     long again (at least a second), so that it fires first.
//   - A bound it cannot see — a dial function of the transport's own, the
//     caller's retry layer — is waited for up to d and half again; the
//     verdict is whatever the client did by then, and a note says when its
//     bound ended the stage ("connect ended by the client after 2.00s").
//   - A stage still in progress then, or one that nothing the runner sees
//     can end (a zero ResponseHeaderTimeout, a net.Dialer without a
//     Timeout) once the scenario's own guard has passed (three times its
//     wait and a second, at least 2s), is reported unbounded.
//   - A bound it sees that is longer than d is not waited for: the
//     scenario fails as "beyond the guard", with the GuardDeadline that
//     would judge it, and is never called unbounded.
func GuardDeadline(d time.Duration) Option {
	return optionFunc(func(r *Runner) error {
		if d <= 0 {
			return fmt.Errorf("audit: guard deadline %v must be positive", d)
		}
		r.guard = d
		return nil
	})
}

// The rows a retry layer is audited in ([Report.RetryRow]).
const (
	// retryConfigured: the layer is set for each contract from its
	// retry.Policy, with its own options (WithRetry's configure).
	retryConfigured = "configured"
	// retryDefaults: the layer is used as it comes, whatever the policy
	// (RetryAtDefaults).
	retryDefaults = "defaults"
)

// RetryAtDefaults says that the retry layer under audit ([WithRetry],
// [WithRetryTransport]) is at its defaults, as it comes, not set from each
// contract's policy: the report names the row ([Report.RetryRow]:
// "defaults" rather than "configured"), and a broken contract's fix says
// what to configure, in the contract's numbers ("configure the retry layer
// (it runs at its defaults) to make at most 2 retries (3 attempts)"),
// never a policy field, which the layer was not given. A library's two rows, at its defaults and
// configured, read as compat's table reads.
func RetryAtDefaults() Option {
	return optionFunc(func(r *Runner) error {
		r.retryRow = retryDefaults
		return nil
	})
}

// defaultServerIdle is the keep-alive timeout assumed of the servers a
// client talks to when [ServerIdleTimeout] says none: a load balancer's
// common idle timeout (AWS's Application Load Balancer's default).
const defaultServerIdle = 60 * time.Second

// ServerIdleTimeout says how long the servers the client talks to keep an
// idle connection open (60s unless said: a load balancer's common idle
// timeout, AWS's Application Load Balancer's default): the
// keep-alive timeout that `connaudit probe -find-idle-timeout` measures on a
// real host. The scenarios whose server closes a connection when it has
// been idle for its own timeout (Scenario.Close "idle") fail a transport
// whose IdleConnTimeout keeps idle connections as long or longer: a request
// it sends as the server closes one is lost (net/http sends a GET again; a
// POST fails). The scenarios' own server closes sooner, to keep the
// catalogue fast; d is what the client's setting is judged against.
func ServerIdleTimeout(d time.Duration) Option {
	return optionFunc(func(r *Runner) error {
		if d <= 0 {
			return fmt.Errorf("audit: ServerIdleTimeout %v must be positive", d)
		}
		r.serverIdle = d
		return nil
	})
}

// defaultParallel is how many scenarios run at once when [Parallel] says
// none: they mostly wait (a bound firing, a body spread over time), so 8
// at once take about as long as the longest, even on 2 CPUs.
const defaultParallel = 8

// Parallel sets how many scenarios [Runner.Run] runs at once: 8 unless
// said; with 1, one after the other, in their order. Each scenario has a
// fault server and a pool of its own and is judged alone, so the verdicts
// are the same either way, and the report keeps the scenarios' order. A
// retry layer of the caller's ([WithRetry], [WithRetryTransport]) may
// share state between the layers its configure returns (a retry budget, a
// circuit breaker): unless Parallel is given, its contracts run one at a
// time, in their order, beside the other scenarios; given, they run at
// once too. Package audittest's subtests run the same way.
func Parallel(n int) Option {
	return optionFunc(func(r *Runner) error {
		if n < 1 {
			return fmt.Errorf("audit: Parallel(%d): want at least 1", n)
		}
		r.parallel, r.parallelSet = n, true
		return nil
	})
}

// Parallel returns how many scenarios the runner runs at once ([Parallel]).
func (r *Runner) Parallel() int { return r.parallel }

// OnResult calls f after each scenario, run or skipped for its protocol,
// as each ends (never two at once; with [Parallel] above 1, in the order
// they end, not the scenarios'), for progress output: a scenario that
// waits out the guard deadline (a stage the transport does not bound) is
// reported as it ends, with the setting that bounds it.
func OnResult(f func(Result)) Option {
	return optionFunc(func(r *Runner) error {
		r.progress = f
		return nil
	})
}

// NewRunner returns a runner.
func NewRunner(opts ...Option) (*Runner, error) {
	r := &Runner{recovery: 3 * time.Second, parallel: defaultParallel, transportName: "connaudit reference pool (MaxConnsPerHost=1)",
		retryName: "connaudit retry (reference)", serverIdle: defaultServerIdle}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("audit: nil option")
		}
		if err := o.apply(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}
