package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
)

// Do sends req with c under the policy and returns the outcome of the last
// attempt, exactly as [http.Client.Do] returned it: the response, whose body
// the caller must close, or the error. Errors of Do's own are an invalid
// policy ([ErrInvalidPolicy], nothing sent), a retry refused for a body that
// cannot be rewound ([ErrBodyNotRewindable]), and the total budget or the
// caller's context ending during a delay (the error wraps
// [context.DeadlineExceeded], or the context's cause). Each of the last two
// wraps the last [Attempt] too: errors.As(err, &a) gives its status, and
// errors.Is sees its error. Like [http.Client.Do], Do closes req.Body, even
// on errors. req itself is not modified.
//
// Each attempt runs on a context derived from ctx, bounded by the total and
// attempt timeouts and numbered for the tracer ([httptrace.Timeline].Attempt) (ctx replaces
// req's own context, as with [http.Request.WithContext]); the returned
// response's body keeps that context alive until it is closed or read to
// EOF, so [Policy.AttemptTimeout] bounds reading it too.
func (p Policy) Do(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
	resp, _, err := p.DoWithReport(ctx, c, req)
	return resp, err
}

// DoWithReport is [Policy.Do], also returning a [Call] of the attempts
// made and why they stopped.
func (p Policy) DoWithReport(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, Call, error) {
	var rep Call
	if err := p.check(ctx, c, req); err != nil {
		if req != nil && req.Body != nil {
			_ = req.Body.Close()
		}
		rep.Stop = StopInvalid
		return nil, rep, err
	}
	retryable := p.Retryable
	if retryable == nil {
		retryable = DefaultRetryable
	}
	replay := p.mayReplay(req)
	hasBody := req.Body != nil && req.Body != http.NoBody

	budget, endBudget := ctx, context.CancelFunc(func() {})
	if p.TotalTimeout > 0 {
		budget, endBudget = context.WithTimeout(ctx, p.TotalTimeout)
	}
	// finish hands the last outcome to the caller, as it came.
	finish := func(a Attempt, reason StopReason, resp *http.Response, err error, endAttempt context.CancelFunc) (*http.Response, Call, error) {
		rep.Attempts = append(rep.Attempts, a)
		rep.Stop = reason
		end := func() { endAttempt(); endBudget() }
		if err != nil || resp == nil {
			end() // with an error, any response's body is already closed
		} else {
			keepAlive(resp, end)
		}
		return resp, rep, err
	}

	body := req.Body
	for n := 1; ; n++ {
		actx, endAttempt := p.attemptContext(budget, n)
		areq := req.WithContext(actx)
		areq.Body = body
		resp, err := c.Do(areq)

		a := Attempt{N: n, Err: err}
		if err == nil {
			a.StatusCode = resp.StatusCode
		}
		a.Retryable = retryable(areq, resp, err)
		switch {
		case err != nil && ctx.Err() != nil:
			// An attempt that failed as the caller's context ended, or the
			// budget (the errors say so, and no predicate retries them):
			// that is why it stopped. A response that came stays final.
			return finish(a, StopCanceled, resp, err, endAttempt)
		case err != nil && budget.Err() != nil:
			return finish(a, StopBudget, resp, err, endAttempt)
		case !a.Retryable:
			return finish(a, StopFinal, resp, err, endAttempt)
		case ctx.Err() != nil:
			return finish(a, StopCanceled, resp, err, endAttempt)
		case budget.Err() != nil:
			return finish(a, StopBudget, resp, err, endAttempt)
		case !replay:
			return finish(a, StopNotReplayable, resp, err, endAttempt)
		case n > p.MaxRetries:
			return finish(a, StopRetriesExhausted, resp, err, endAttempt)
		}

		// A retry is due, after the delay. The delay is waited even when
		// the budget will end during it: the budget then ends the call
		// with its deadline error, as it would end an attempt. Only a
		// Retry-After the budget cannot give (opted into) stops at once.
		d := p.delay(n, rand.Float64())
		if p.HonorRetryAfter && err == nil {
			if ra, ok := retryAfter(resp, time.Now()); ok {
				if deadline, ok := budget.Deadline(); ok && !time.Now().Add(ra).Before(deadline) {
					return finish(a, StopBudget, resp, err, endAttempt)
				}
				d = max(d, ra)
			}
		}
		if hasBody && req.GetBody == nil {
			discard(resp, endAttempt)
			endBudget()
			rep.Attempts = append(rep.Attempts, a)
			rep.Stop = StopBodyNotRewindable
			return nil, rep, fmt.Errorf("%w: Request.GetBody is nil; %w", ErrBodyNotRewindable, a)
		}

		a.Delay = d
		rep.Attempts = append(rep.Attempts, a)
		discard(resp, endAttempt)
		if !sleep(budget, d) {
			endBudget()
			if ctx.Err() != nil {
				rep.Stop = StopCanceled
				return nil, rep, fmt.Errorf("retry: waiting to retry: %w; %w", context.Cause(ctx), a)
			}
			rep.Stop = StopBudget
			return nil, rep, fmt.Errorf("retry: total budget of %v ran out waiting to retry: %w; %w", p.TotalTimeout, context.Cause(budget), a)
		}
		if hasBody {
			b, gerr := req.GetBody()
			if gerr != nil {
				endBudget()
				rep.Stop = StopBodyNotRewindable
				return nil, rep, fmt.Errorf("%w: Request.GetBody: %w", ErrBodyNotRewindable, gerr)
			}
			body = b
		}
	}
}

// check rejects what Do cannot work with, before anything is sent.
func (p Policy) check(ctx context.Context, c *http.Client, req *http.Request) error {
	var errs []error
	if ctx == nil {
		errs = append(errs, fmt.Errorf("%w: nil context", ErrInvalidPolicy))
	}
	if c == nil {
		errs = append(errs, fmt.Errorf("%w: nil *http.Client", ErrInvalidPolicy))
	}
	if req == nil {
		errs = append(errs, fmt.Errorf("%w: nil *http.Request", ErrInvalidPolicy))
	}
	errs = append(errs, p.Validate())
	return errors.Join(errs...)
}

// attemptContext returns the context of attempt n: a child of the budget,
// bounded by AttemptTimeout and numbered for the httptrace timeline.
func (p Policy) attemptContext(budget context.Context, n int) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var cancel context.CancelFunc
	if p.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(budget, p.AttemptTimeout)
	} else {
		ctx, cancel = context.WithCancel(budget)
	}
	return hook.WithAttempt(ctx, n), cancel
}

// sleep waits for d or until ctx ends, and reports whether ctx is still
// alive.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		// Both may be ready at once (a goroutine scheduled late): a
		// budget that has run out ends the call even so.
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
