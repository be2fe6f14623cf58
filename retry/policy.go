package retry

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Policy says how often, how long and for which outcomes a request is
// retried. The zero Policy makes exactly one attempt with no time bound of
// its own; start from [Default] for a useful policy. A Policy is a plain
// value: [Policy.Validate] rejects nonsense, and [Policy.Do] validates
// before it sends anything. A Policy may be used by many goroutines at once
// provided its Retryable function may.
type Policy struct {
	// AttemptTimeout bounds each attempt, from sending the request until its
	// response body is closed; it restarts with every attempt. 0 means no
	// per-attempt bound (the total budget and the caller's context still
	// apply).
	AttemptTimeout time.Duration

	// TotalTimeout bounds all attempts and the delays between them. 0 means
	// no bound besides the caller's context. When set, it is the budget of
	// the returned response's body too. Ending during a delay, it ends the
	// call with an error wrapping [context.DeadlineExceeded].
	TotalTimeout time.Duration

	// MaxRetries is the number of retries after the first attempt: at most
	// MaxRetries+1 attempts are made.
	MaxRetries int

	// Delay is the wait before the first retry, and before every retry when
	// Backoff is nil.
	Delay time.Duration

	// Backoff, when non-nil, grows the delay exponentially from Delay.
	Backoff *Backoff

	// Retryable reports whether the outcome of an attempt may be retried:
	// resp is the response (err nil) or err the error of [http.Client.Do].
	// It must not read or close resp.Body. It judges outcomes, not methods:
	// whatever it says, a request the policy may not replay (see
	// RetryIdempotencyKey) is not retried. nil means [DefaultRetryable].
	Retryable func(req *http.Request, resp *http.Response, err error) bool

	// HonorRetryAfter makes the delay after a 503 or 429 response at least
	// its Retry-After (seconds or HTTP-date). A Retry-After that would end
	// after the total budget stops the retries at once and returns that
	// response. It requires a TotalTimeout.
	HonorRetryAfter bool

	// RetryIdempotencyKey allows a request with any method to be replayed
	// when it carries an Idempotency-Key (or X-Idempotency-Key) header, by
	// which the server can deduplicate its side effect.
	RetryIdempotencyKey bool

	// RetryIdempotentMethods allows PUT, DELETE, OPTIONS and TRACE to be
	// replayed: RFC 9110 defines them as idempotent, but whether a server's
	// handler honours that is the server's business, so it is off by default.
	RetryIdempotentMethods bool

	// UnsafeRetryNonIdempotent allows any request to be replayed, whatever
	// its method. A POST or PATCH retried after its side effect happened
	// (for instance a 503 sent after the write) repeats that side effect.
	UnsafeRetryNonIdempotent bool
}

// Backoff grows the delay between attempts: the delay before retry k
// (k = 1, 2, …) is Delay × Multiplier^(k-1), capped at Max, then reduced by
// a random fraction of up to Jitter of itself.
type Backoff struct {
	// Multiplier is the growth factor per retry; 0 means 2. It must not be
	// less than 1.
	Multiplier float64

	// Max caps the delay before jitter; 0 means no cap. When set, it must
	// not be less than the policy's Delay.
	Max time.Duration

	// Jitter is the fraction, in [0, 1], by which a delay may be randomly
	// shortened: 0 means none, 1 means "full jitter" (uniform in [0, d]).
	Jitter float64
}

// Default returns a conservative policy: 503 on GET and HEAD is retried at
// most twice, each attempt within 10 s, all attempts and delays
// within 30 s, with a delay of 200 ms doubling up to 2 s with 20% jitter.
// Retry-After is not honoured and no other method is replayed unless the
// caller opts in.
func Default() Policy {
	return Policy{
		AttemptTimeout: 10 * time.Second,
		TotalTimeout:   30 * time.Second,
		MaxRetries:     2,
		Delay:          200 * time.Millisecond,
		Backoff:        &Backoff{Multiplier: 2, Max: 2 * time.Second, Jitter: 0.2},
	}
}

// DefaultRetryable is the default [Policy.Retryable]: it accepts a 503
// Service Unavailable response and nothing else, no error in particular.
// With the default method rules this means 503 on GET and HEAD.
func DefaultRetryable(req *http.Request, resp *http.Response, err error) bool {
	return err == nil && resp != nil && resp.StatusCode == http.StatusServiceUnavailable
}

// Validate reports every problem of p at once (joined with [errors.Join]),
// each wrapping [ErrInvalidPolicy], or nil when p is usable.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...))
	}
	if p.AttemptTimeout < 0 {
		bad("AttemptTimeout %v is negative", p.AttemptTimeout)
	}
	if p.TotalTimeout < 0 {
		bad("TotalTimeout %v is negative", p.TotalTimeout)
	}
	if p.AttemptTimeout > 0 && p.TotalTimeout > 0 && p.AttemptTimeout > p.TotalTimeout {
		bad("AttemptTimeout %v is longer than TotalTimeout %v", p.AttemptTimeout, p.TotalTimeout)
	}
	if p.MaxRetries < 0 {
		bad("MaxRetries %d is negative", p.MaxRetries)
	}
	if p.Delay < 0 {
		bad("Delay %v is negative", p.Delay)
	}
	if p.MaxRetries > 0 && p.TotalTimeout > 0 && p.Delay >= p.TotalTimeout {
		bad("Delay %v is not shorter than TotalTimeout %v: no retry could ever run", p.Delay, p.TotalTimeout)
	}
	if p.HonorRetryAfter && p.TotalTimeout == 0 {
		bad("HonorRetryAfter needs a TotalTimeout, or a server's Retry-After could hold the caller without bound")
	}
	if b := p.Backoff; b != nil {
		if math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0) || (b.Multiplier != 0 && b.Multiplier < 1) {
			bad("Backoff.Multiplier %v must be 0 (meaning 2) or a finite number not less than 1", b.Multiplier)
		}
		if b.Max < 0 {
			bad("Backoff.Max %v is negative", b.Max)
		}
		if b.Max > 0 && b.Max < p.Delay {
			bad("Backoff.Max %v is shorter than Delay %v", b.Max, p.Delay)
		}
		if math.IsNaN(b.Jitter) || b.Jitter < 0 || b.Jitter > 1 {
			bad("Backoff.Jitter %v is outside [0, 1]", b.Jitter)
		}
		if p.Delay == 0 {
			bad("Backoff is set but Delay is 0: there is nothing to grow")
		}
	}
	return errors.Join(errs...)
}

// delay returns the wait before retry k (1-based); u in [0, 1) is the random
// draw used for jitter.
func (p Policy) delay(k int, u float64) time.Duration {
	b := p.Backoff
	if b == nil || p.Delay == 0 {
		return p.Delay
	}
	m := b.Multiplier
	if m == 0 {
		m = 2
	}
	limit := float64(math.MaxInt64)
	if b.Max > 0 {
		limit = float64(b.Max)
	}
	d := float64(p.Delay)
	for i := 1; i < k && d < limit; i++ {
		d *= m
	}
	d = min(d, limit)
	d -= d * b.Jitter * u
	if d >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// mayReplay reports whether the policy allows req to be sent again.
func (p Policy) mayReplay(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead:
		return true
	case http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodTrace:
		if p.RetryIdempotentMethods {
			return true
		}
	}
	if p.UnsafeRetryNonIdempotent {
		return true
	}
	return p.RetryIdempotencyKey && hasIdempotencyKey(req.Header)
}

// hasIdempotencyKey reports whether h carries a key by which a server can
// deduplicate a replayed request (the same headers net/http recognises).
func hasIdempotencyKey(h http.Header) bool {
	for _, k := range [...]string{"Idempotency-Key", "X-Idempotency-Key"} {
		if v, ok := h[k]; ok && len(v) > 0 && v[0] != "" {
			return true
		}
	}
	return false
}
