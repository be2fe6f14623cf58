package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	retrygo "github.com/avast/retry-go/v4"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/go-resty/resty/v2"
	"github.com/gojek/heimdall/v7"
	"github.com/gojek/heimdall/v7/httpclient"
	"github.com/hashicorp/go-retryablehttp"
	goretry "github.com/sethvargo/go-retry"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/retry"
)

// The two rows of every library.
const (
	rowDefaults   = "defaults"
	rowConfigured = "configured"
)

// shorten is how much a library's default waits between attempts are
// shortened in its defaults row, so that the catalogue runs in seconds:
// the waits only. Timeouts and attempt counts stay the library's.
const shorten = 100

// client is a library under audit, in its two rows.
type client struct {
	name   string
	module string // its module path, for the version; "" for this tree's
	// defaults is the library's documented starting point, its waits
	// shortened; configured is the library set for each contract's policy
	// with its own documented options.
	defaults, configured layer
}

// layer is one row: how the library is set, and the retry layer it makes
// for a contract's policy.
type layer struct {
	// how names the options, for the table's notes.
	how string
	// guard, when set, is the audit's guard deadline for this row: past
	// a default timeout of the library's, so that the timeout, not the
	// guard, ends a request it bounds.
	guard     time.Duration
	configure func(p retry.Policy) (audit.RetryFunc, error)
}

// clients are the libraries compared. Every row sends each attempt through
// the client the audit gives (the audited pool), whatever client the
// library would build for itself, and none logs. In the configured rows
// every library applies the contracts' rules the same way: only a 503 is
// retried, and only for a request the policy may replay (GET and HEAD,
// others as the policy opts in); MaxRetries and a fixed Delay; the attempt
// limit as the library's own (http.Client.Timeout where it has none); the
// total budget as the context's deadline (the reference has its own); and
// the last 503 itself handed to the caller when retries run out. A rule a
// library has no option for is left out, and the table says so.
//
// The generic loops (backoff, retry-go, go-retry) take a loop body, which
// is the user's code in either row: one attempt within the attempt limit,
// the 503 the policy may replay returned as an error to retry, any other
// response returned, and the transport's error as it is. What the library
// decides — which of those errors it retries, how often, how long it waits,
// what it does with the context, what reaches the caller — is what its rows
// judge.
func clients() []client {
	return []client{
		{name: "connaudit retry",
			defaults: layer{how: "retry.Default(): 503 on GET and HEAD, 2 retries, attempt 10s, total 30s; " +
				"delays 2ms doubling to 20ms (from 200ms to 2s)", guard: 11 * time.Second, configure: connauditDefaults},
			configured: layer{how: "the contract's retry.Policy", configure: func(p retry.Policy) (audit.RetryFunc, error) {
				return p.Do, nil
			}}},
		{name: "go-retryablehttp", module: "github.com/hashicorp/go-retryablehttp",
			defaults: layer{how: "NewClient(): DefaultRetryPolicy, DefaultBackoff, RetryMax 4, no ErrorHandler, " +
				"no timeout; RetryWaitMin 10ms, RetryWaitMax 300ms (from 1s, 30s)", configure: retryablehttpDefaults},
			configured: layer{how: "RetryMax, RetryWaitMin = RetryWaitMax = Delay, a CheckRetry of 503 on a replayable " +
				"request, PassthroughErrorHandler, HTTPClient.Timeout, the budget as the context's deadline",
				configure: retryablehttpConfigured}},
		{name: "resty", module: "github.com/go-resty/resty/v2",
			defaults: layer{how: "NewWithClient(): no retries (RetryCount 0), no timeout", configure: restyDefaults},
			configured: layer{how: "SetRetryCount, SetRetryWaitTime = SetRetryMaxWaitTime = Delay, an AddRetryCondition " +
				"of 503 on a replayable request, SetTimeout, the budget as the context's deadline", configure: restyConfigured}},
		{name: "backoff", module: "github.com/cenkalti/backoff/v5",
			defaults: layer{how: "Retry(ctx, op): NewExponentialBackOff (initial 5ms, max 600ms, from 500ms, 60s), " +
				"MaxElapsedTime 15m, no MaxTries; every error but a Permanent one retried", configure: backoffDefaults},
			configured: layer{how: "WithBackOff(NewConstantBackOff(Delay)), WithMaxTries, WithMaxElapsedTime(0), " +
				"Permanent for what is not retried, the budget as the context's deadline", configure: backoffConfigured}},
		{name: "retry-go", module: "github.com/avast/retry-go/v4",
			defaults: layer{how: "DoWithData(op): 10 attempts, BackOffDelay+RandomDelay, Delay 1ms, MaxJitter 1ms " +
				"(from 100ms), every error retried, no context", configure: retrygoDefaults},
			configured: layer{how: "Attempts, Delay with FixedDelay, RetryIf, LastErrorOnly, Context with the budget " +
				"as its deadline", configure: retrygoConfigured}},
		{name: "go-retry", module: "github.com/sethvargo/go-retry",
			defaults: layer{how: "Fibonacci(ctx, 10ms, f) (from 1s): no retry limit; RetryableError for the 503",
				configure: goretryDefaults},
			configured: layer{how: "Do with WithMaxRetries over a constant Delay, RetryableError for the 503, the " +
				"budget as the context's deadline (not WithMaxDuration)", configure: goretryConfigured}},
		{name: "failsafe-go", module: "github.com/failsafe-go/failsafe-go",
			defaults: layer{how: "failsafehttp.NewRoundTripper with NewRetryPolicyBuilder(): errors, 429 and 5xx but " +
				"501 retried, 2 retries, no delay, ExceededError when they run out, no timeout",
				configure: failsafeDefaults},
			configured: layer{how: "failsafehttp.NewRoundTripper with a retrypolicy of HandleIf(503 on a replayable " +
				"request), WithMaxRetries, WithDelay, ReturnLastFailure, inside it timeout.New(AttemptTimeout); the " +
				"budget as the request context's deadline", configure: failsafeConfigured}},
		{name: "heimdall", module: "github.com/gojek/heimdall/v7",
			defaults: layer{how: "httpclient.NewClient(): no retries (retryCount 0, NoRetrier), HTTP timeout 30s",
				guard: 31 * time.Second, configure: heimdallDefaults},
			configured: layer{how: "WithRetryCount, WithRetrier(NewRetrier(NewConstantBackoff(Delay, 0))), " +
				"WithHTTPTimeout as the attempt limit, the budget as the request context's deadline",
				configure: heimdallConfigured}},
	}
}

// connauditDefaults is retry.Default() with its delays shortened.
func connauditDefaults(retry.Policy) (audit.RetryFunc, error) {
	p := retry.Default()
	p.Delay /= shorten
	p.Backoff.Max /= shorten
	return p.Do, nil
}

func retryablehttpDefaults(retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := retryablehttp.NewClient()
		rc.HTTPClient, rc.Logger = c, nil
		rc.RetryWaitMin /= shorten
		rc.RetryWaitMax /= shorten
		rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		return rc.Do(rreq)
	}, nil
}

// retryablehttpConfigured: CheckRetry replaces DefaultRetryPolicy (errors,
// 429, 5xx but 501) with the contracts' rule, and PassthroughErrorHandler
// hands over the last response instead of "giving up after n attempt(s)".
func retryablehttpConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := retryablehttp.NewClient()
		rc.HTTPClient, rc.Logger = attemptClient(c, p.AttemptTimeout), nil
		rc.RetryMax = p.MaxRetries
		rc.RetryWaitMin, rc.RetryWaitMax = p.Delay, p.Delay
		rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return err == nil && resp.StatusCode == http.StatusServiceUnavailable && mayReplay(p, resp.Request), nil
		}
		rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
		ctx, done := budget(ctx, p.TotalTimeout)
		rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
		if err != nil {
			return done(nil, err)
		}
		return done(rc.Do(rreq))
	}, nil
}

func restyDefaults(retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := resty.NewWithClient(c).SetLogger(quiet{})
		rc.RetryWaitTime /= shorten
		rc.RetryMaxWaitTime /= shorten
		return restyDo(ctx, rc, req)
	}, nil
}

// restyConfigured: resty retries only errors by default, and a retry
// condition replaces that; the condition is the contracts' rule.
func restyConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := resty.NewWithClient(c).
			SetLogger(quiet{}).
			SetTimeout(p.AttemptTimeout).
			SetRetryCount(p.MaxRetries).
			SetRetryWaitTime(p.Delay).
			SetRetryMaxWaitTime(p.Delay).
			AddRetryCondition(func(r *resty.Response, err error) bool {
				return err == nil && r != nil && r.StatusCode() == http.StatusServiceUnavailable && mayReplay(p, r.Request.RawRequest)
			})
		ctx, done := budget(ctx, p.TotalTimeout)
		return done(restyDo(ctx, rc, req))
	}, nil
}

// restyDo sends req with resty, which reads the body (as by default), and
// hands the caller an http.Response with that body.
func restyDo(ctx context.Context, rc *resty.Client, req *http.Request) (*http.Response, error) {
	r := rc.R().SetContext(ctx).SetHeaderMultiValues(req.Header)
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		r.SetBody(b)
	}
	resp, err := r.Execute(req.Method, req.URL.String())
	if err != nil {
		return nil, err
	}
	raw := resp.RawResponse
	raw.Body = io.NopCloser(bytes.NewReader(resp.Body()))
	return raw, nil
}

type quiet struct{}

func (quiet) Errorf(string, ...any) {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Debugf(string, ...any) {}

func backoffDefaults(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		l := newLoop(ctx, c, req, p, 0)
		b := backoff.NewExponentialBackOff()
		b.InitialInterval /= shorten
		b.MaxInterval /= shorten
		resp, err := backoff.Retry(ctx, l.attempt, backoff.WithBackOff(b))
		return l.result(resp, err)
	}, nil
}

func backoffConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		ctx, done := budget(ctx, p.TotalTimeout)
		l := newLoop(ctx, c, req, p, p.AttemptTimeout)
		resp, err := backoff.Retry(ctx, func() (*http.Response, error) {
			resp, err := l.attempt()
			if err != nil && !errors.Is(err, errRetry) {
				return nil, backoff.Permanent(err)
			}
			return resp, err
		}, backoff.WithBackOff(backoff.NewConstantBackOff(p.Delay)),
			backoff.WithMaxTries(uint(p.MaxRetries+1)),
			backoff.WithMaxElapsedTime(0))
		return done(l.result(resp, err))
	}, nil
}

func retrygoDefaults(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		l := newLoop(ctx, c, req, p, 0)
		resp, err := retrygo.DoWithData(l.attempt, retrygo.Delay(100*time.Millisecond/shorten),
			retrygo.MaxJitter(100*time.Millisecond/shorten))
		return l.result(resp, err)
	}, nil
}

func retrygoConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		ctx, done := budget(ctx, p.TotalTimeout)
		l := newLoop(ctx, c, req, p, p.AttemptTimeout)
		resp, err := retrygo.DoWithData(l.attempt,
			retrygo.Attempts(uint(p.MaxRetries+1)),
			retrygo.Delay(p.Delay), retrygo.DelayType(retrygo.FixedDelay),
			retrygo.RetryIf(func(err error) bool { return errors.Is(err, errRetry) }),
			retrygo.LastErrorOnly(true),
			retrygo.Context(ctx))
		return done(l.result(resp, err))
	}, nil
}

func goretryDefaults(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		l := newLoop(ctx, c, req, p, 0)
		var resp *http.Response
		err := goretry.Fibonacci(ctx, time.Second/shorten, func(context.Context) error {
			var err error
			resp, err = l.attempt()
			if errors.Is(err, errRetry) {
				return goretry.RetryableError(err)
			}
			return err
		})
		return l.result(resp, err)
	}, nil
}

// goretryConfigured: NewConstant panics on a zero delay (W1 and W2 have
// none), so a zero delay is its documented BackoffFunc returning 0.
func goretryConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		ctx, done := budget(ctx, p.TotalTimeout)
		l := newLoop(ctx, c, req, p, p.AttemptTimeout)
		var b goretry.Backoff = goretry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
		if p.Delay > 0 {
			b = goretry.NewConstant(p.Delay)
		}
		resp, err := goretry.DoValue(ctx, goretry.WithMaxRetries(uint64(p.MaxRetries), b),
			func(context.Context) (*http.Response, error) {
				resp, err := l.attempt()
				if errors.Is(err, errRetry) {
					return resp, goretry.RetryableError(err)
				}
				return resp, err
			})
		return done(l.result(resp, err))
	}, nil
}

// failsafeDefaults is failsafehttp's documented starting point: its
// RoundTripper with the retry policy its NewRetryPolicyBuilder builds.
func failsafeDefaults(retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		fc := *c
		fc.Transport = failsafehttp.NewRoundTripper(c.Transport, failsafehttp.NewRetryPolicyBuilder().Build())
		return fc.Do(req.WithContext(ctx))
	}, nil
}

// failsafeConfigured: a Timeout inside the RetryPolicy times each attempt
// out (failsafe composes the policies given first outermost).
func failsafeConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rp := retrypolicy.NewBuilder[*http.Response]().
			HandleIf(func(resp *http.Response, err error) bool {
				return err == nil && resp.StatusCode == http.StatusServiceUnavailable && mayReplay(p, resp.Request)
			}).
			WithMaxRetries(p.MaxRetries).
			WithDelay(p.Delay).
			ReturnLastFailure().
			Build()
		policies := []failsafe.Policy[*http.Response]{rp}
		if p.AttemptTimeout > 0 {
			policies = append(policies, timeout.New[*http.Response](p.AttemptTimeout))
		}
		fc := *c
		fc.Transport = failsafehttp.NewRoundTripper(c.Transport, policies...)
		ctx, done := budget(ctx, p.TotalTimeout)
		return done(fc.Do(req.WithContext(ctx)))
	}, nil
}

// heimdallDefaults is httpclient.NewClient(): its own http.Client has a 30s
// Timeout; the audit's client takes it.
func heimdallDefaults(retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		hc := httpclient.NewClient(httpclient.WithHTTPClient(attemptClient(c, 30*time.Second)))
		return hc.Do(req.WithContext(ctx))
	}, nil
}

// heimdallConfigured: heimdall has no retry condition (it retries every
// error and every status from 500) and no method rule; what it has is set.
func heimdallConfigured(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		hc := httpclient.NewClient(
			httpclient.WithHTTPClient(attemptClient(c, p.AttemptTimeout)),
			httpclient.WithRetryCount(p.MaxRetries),
			httpclient.WithRetrier(heimdall.NewRetrier(heimdall.NewConstantBackoff(p.Delay, 0))))
		ctx, done := budget(ctx, p.TotalTimeout)
		return done(hc.Do(req.WithContext(ctx)))
	}, nil
}

// errRetry marks the outcome the loop body retries: a 503 to a request the
// policy may replay.
var errRetry = errors.New("503 Service Unavailable")

// loop is the body of a generic retry loop, written for the contracts'
// policy: each attempt within the attempt limit (none: 0), only a 503
// retried, and only for a request the policy may replay; the last 503 kept
// for the caller.
type loop struct {
	ctx    context.Context
	c      *http.Client
	req    *http.Request
	replay bool
	n      int
	last   *http.Response // the last retryable response, not yet discarded
}

func newLoop(ctx context.Context, c *http.Client, req *http.Request, p retry.Policy, attemptLimit time.Duration) *loop {
	return &loop{ctx: ctx, c: attemptClient(c, attemptLimit), req: req, replay: mayReplay(p, req)}
}

func (l *loop) attempt() (*http.Response, error) {
	l.discard()
	l.n++
	r := l.req.WithContext(l.ctx)
	if l.n > 1 && l.req.GetBody != nil {
		b, err := l.req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	resp, err := l.c.Do(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusServiceUnavailable && l.replay {
		l.last = resp
		return resp, errRetry
	}
	return resp, nil
}

// result is what the caller gets when the library stops: the response, or
// the last 503 itself when the library gave up on it, or the error.
func (l *loop) result(resp *http.Response, err error) (*http.Response, error) {
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, errRetry) && l.last != nil:
		return l.last, nil
	}
	l.discard()
	return nil, err
}

func (l *loop) discard() {
	if l.last != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(l.last.Body, 64<<10))
		l.last.Body.Close()
		l.last = nil
	}
}

// mayReplay is the policy's rule: GET and HEAD, and other methods only as
// the policy opts in.
func mayReplay(p retry.Policy, req *http.Request) bool {
	if req == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead:
		return true
	}
	return p.UnsafeRetryNonIdempotent || (p.RetryIdempotencyKey && req.Header.Get("Idempotency-Key") != "")
}

// attemptClient is c with d as its Timeout, the standard per-request bound
// through reading the body: each call of Do is an attempt.
func attemptClient(c *http.Client, d time.Duration) *http.Client {
	cc := *c
	cc.Timeout = d
	return &cc
}

// budget bounds ctx by d, the total budget, for a library that takes its
// budget from the request's context; the budget lives on until the
// returned body is closed or read to its end.
func budget(ctx context.Context, d time.Duration) (context.Context, func(*http.Response, error) (*http.Response, error)) {
	if d <= 0 {
		return ctx, func(resp *http.Response, err error) (*http.Response, error) { return resp, err }
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, func(resp *http.Response, err error) (*http.Response, error) {
		if resp == nil || resp.Body == nil {
			cancel()
			return resp, err
		}
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, err
	}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// whyNot says, for each library, why its configured row cannot hold a
// contract: what its source (at the version in go.mod) has no option for.
var whyNot = map[string]map[string]string{
	"failsafe-go": {
		"A2": failsafeUnclosed, "A3": failsafeUnclosed, "A8": failsafeUnclosed, "A9": failsafeUnclosed,
		"W1": failsafeUnclosed, "W2": failsafeUnclosed, "W3": failsafeUnclosed, "P1": failsafeUnclosed,
		"A6": "a Timeout ends the attempt with timeout.ErrExceeded (timeout/timeout.go: errors.New), which " +
			"is neither context.DeadlineExceeded nor a net.Error timeout; no option changes it",
	},
	"heimdall": {
		"A5": heimdallCondition, "A7": heimdallCondition, "W4": heimdallCondition, "H2": heimdallCondition,
		"A6": heimdallCondition + "; and its error is a valkyrie.MultiError of the errors' texts, which is " +
			"not context.DeadlineExceeded",
		"A8": "its delay is a time.Sleep no context ends, and its loop goes on once the budget has run out " +
			"(httpclient/client.go, Do): attempts start on a dead context",
		"P1": "its loop goes on after the caller's cancel, and its error, a valkyrie.MultiError of the " +
			"errors' texts, is not context.Canceled (httpclient/client.go, Do)",
	},
}

const (
	failsafeUnclosed = "its retry policy drops a response it retries without closing its body " +
		"(retrypolicy/retryexecutor.go runs the attempt again), and closing it from a listener would cancel " +
		"the whole call (failsafehttp/client.go: bodyWithCancel.Close calls the request's cancel)"
	heimdallCondition = "its retry condition is fixed: every error and every status from 500 is retried, " +
		"whatever the method (httpclient/client.go, Do); no option sets it"
)
