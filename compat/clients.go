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
	"github.com/go-resty/resty/v2"
	"github.com/hashicorp/go-retryablehttp"
	goretry "github.com/sethvargo/go-retry"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/retry"
)

// client is a retry layer under audit: how it is configured for a
// contract's policy.
type client struct {
	name   string
	module string // its module path, for the version; "" for this tree's
	// configure sets the layer as closely to the policy as it allows.
	configure func(p retry.Policy) (audit.RetryFunc, error)
}

// clients are the retry layers compared. The HTTP clients with retries of
// their own keep their documented retry conditions and take the policy's
// numbers; the generic retry loops run a loop body written for the
// policy (attempt), and are judged on what the library itself decides:
// how many attempts, how long between them, what the budget does, and
// what reaches the caller.
func clients() []client {
	return []client{
		{name: "connaudit retry", configure: func(p retry.Policy) (audit.RetryFunc, error) { return p.Do, nil }},
		{name: "go-retryablehttp", module: "github.com/hashicorp/go-retryablehttp", configure: retryablehttpLayer},
		{name: "resty", module: "github.com/go-resty/resty/v2", configure: restyLayer},
		{name: "backoff", module: "github.com/cenkalti/backoff/v5", configure: backoffLayer},
		{name: "retry-go", module: "github.com/avast/retry-go/v4", configure: retrygoLayer},
		{name: "go-retry", module: "github.com/sethvargo/go-retry", configure: goretryLayer},
	}
}

// retryablehttpLayer: its Client with RetryMax, a fixed wait (RetryWaitMin
// = RetryWaitMax), the HTTP client's Timeout as the attempt limit and the
// request's context as the total budget; CheckRetry stays
// DefaultRetryPolicy (errors, 429, 5xx but 501), ErrorHandler stays nil.
func retryablehttpLayer(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := retryablehttp.NewClient()
		rc.HTTPClient = attemptClient(c, p.AttemptTimeout)
		rc.Logger = nil
		rc.RetryMax = p.MaxRetries
		rc.RetryWaitMin, rc.RetryWaitMax = p.Delay, p.Delay
		ctx, done := budget(ctx, p.TotalTimeout)
		rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
		if err != nil {
			return done(nil, err)
		}
		return done(rc.Do(rreq))
	}, nil
}

// restyLayer: SetRetryCount, a fixed wait (RetryWaitTime =
// RetryMaxWaitTime), SetTimeout as the attempt limit, the request's context
// as the total budget; resty retries only errors by default, so 503 is
// added with AddRetryCondition, as its documentation shows for a status.
// The body is read by resty, as by default.
func restyLayer(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		rc := resty.NewWithClient(c).
			SetLogger(quiet{}).
			SetTimeout(p.AttemptTimeout).
			SetRetryCount(p.MaxRetries).
			SetRetryWaitTime(p.Delay).
			SetRetryMaxWaitTime(p.Delay).
			AddRetryCondition(func(r *resty.Response, _ error) bool {
				return r != nil && r.StatusCode() == http.StatusServiceUnavailable
			})
		ctx, done := budget(ctx, p.TotalTimeout)
		r := rc.R().SetContext(ctx).SetHeaderMultiValues(req.Header)
		if req.Body != nil {
			b, err := io.ReadAll(req.Body)
			req.Body.Close()
			if err != nil {
				return done(nil, err)
			}
			r.SetBody(b)
		}
		resp, err := r.Execute(req.Method, req.URL.String())
		if err != nil {
			return done(nil, err)
		}
		raw := resp.RawResponse
		raw.Body = io.NopCloser(bytes.NewReader(resp.Body()))
		return done(raw, nil)
	}, nil
}

type quiet struct{}

func (quiet) Errorf(string, ...any) {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Debugf(string, ...any) {}

// backoffLayer: Retry with a ConstantBackOff, WithMaxTries and
// WithMaxElapsedTime as the total budget.
func backoffLayer(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		l := newLoop(ctx, c, req, p)
		resp, err := backoff.Retry(ctx, func() (*http.Response, error) {
			resp, err := l.attempt()
			if err != nil && !errors.Is(err, errRetry) {
				return nil, backoff.Permanent(err)
			}
			return resp, err
		}, backoff.WithBackOff(backoff.NewConstantBackOff(p.Delay)),
			backoff.WithMaxTries(uint(p.MaxRetries+1)),
			backoff.WithMaxElapsedTime(p.TotalTimeout))
		return l.result(resp, err)
	}, nil
}

// retrygoLayer: DoWithData with Attempts, a FixedDelay, RetryIf for the
// loop's retryable outcome, LastErrorOnly, and a context as the total
// budget (retry-go has none of its own).
func retrygoLayer(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		ctx, done := budget(ctx, p.TotalTimeout)
		l := newLoop(ctx, c, req, p)
		resp, err := retrygo.DoWithData(l.attempt,
			retrygo.Attempts(uint(p.MaxRetries+1)),
			retrygo.Delay(p.Delay), retrygo.DelayType(retrygo.FixedDelay),
			retrygo.RetryIf(func(err error) bool { return errors.Is(err, errRetry) }),
			retrygo.LastErrorOnly(true),
			retrygo.Context(ctx))
		return done(l.result(resp, err))
	}, nil
}

// goretryLayer: DoValue with WithMaxRetries over NewConstant, and
// WithMaxDuration as the total budget.
func goretryLayer(p retry.Policy) (audit.RetryFunc, error) {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		l := newLoop(ctx, c, req, p)
		b := goretry.WithMaxRetries(uint64(p.MaxRetries), goretry.NewConstant(p.Delay))
		if p.TotalTimeout > 0 {
			b = goretry.WithMaxDuration(p.TotalTimeout, b)
		}
		resp, err := goretry.DoValue(ctx, b, func(context.Context) (*http.Response, error) {
			resp, err := l.attempt()
			if errors.Is(err, errRetry) {
				return resp, goretry.RetryableError(err)
			}
			return resp, err
		})
		return l.result(resp, err)
	}, nil
}

// errRetry marks the outcome the policy retries: a 503 to a request it may
// replay.
var errRetry = errors.New("503 Service Unavailable")

// loop is the body of a retry loop written for the contracts' policy:
// each attempt within the attempt limit, only a 503 retried, and only for
// a request the policy may replay; the last 503 kept for the caller.
type loop struct {
	ctx    context.Context
	c      *http.Client
	req    *http.Request
	replay bool
	n      int
	last   *http.Response // the last retryable response, not yet discarded
}

func newLoop(ctx context.Context, c *http.Client, req *http.Request, p retry.Policy) *loop {
	return &loop{ctx: ctx, c: attemptClient(c, p.AttemptTimeout), req: req, replay: mayReplay(p, req)}
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
