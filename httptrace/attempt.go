package httptrace

import (
	"context"
	"sync/atomic"
)

type attemptKey struct{}

// WithAttempt returns a copy of ctx that numbers the attempt of a request
// made with it. A retry policy calls it once per attempt (1, 2, …) so that
// each attempt's [Timeline] carries its number and an audit can compare the
// attempts a caller made with the requests a server saw.
func WithAttempt(ctx context.Context, n int) context.Context {
	if !attempted.Load() {
		attempted.Store(true)
	}
	return context.WithValue(ctx, attemptKey{}, n)
}

// attempted is set once [WithAttempt] was called in this process. Until
// then no context carries an attempt number, and [AttemptFromContext],
// which the tracer calls for every request, need not walk the request
// context's chain of parents (often many layers deep in a service) to find
// none.
var attempted atomic.Bool

// AttemptFromContext returns the attempt number set by [WithAttempt], or 0
// when the request was not made by a retry policy.
func AttemptFromContext(ctx context.Context) int {
	if !attempted.Load() {
		return 0
	}
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}
