package httptrace

import "context"

type attemptKey struct{}

// WithAttempt returns a copy of ctx that numbers the attempt of a request
// made with it. A retry policy calls it once per attempt (1, 2, …) so that
// each attempt's [Timeline] carries its number and an audit can compare the
// attempts a caller made with the requests a server saw.
func WithAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// AttemptFromContext returns the attempt number set by [WithAttempt], or 0
// when the request was not made by a retry policy.
func AttemptFromContext(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}
