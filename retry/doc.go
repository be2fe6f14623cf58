// Package retry runs an HTTP request under a bounded retry policy.
//
// A retry policy is where connection pools leak and budgets overflow, so
// [Policy.Do] is strict about a few things:
//
//   - Every attempt gets a fresh context bounded by [Policy.AttemptTimeout]
//     and numbered (1, 2, …) with
//     the tracer's attempt number, so that an
//     audit can compare the attempts a caller made with the requests a
//     server saw.
//   - [Policy.TotalTimeout] bounds all attempts and the delays between them.
//     A budget that ends during a delay ends the call there, with an error
//     wrapping [context.DeadlineExceeded] and the last [Attempt] (whose
//     status errors.As recovers); the caller's context ending does the same
//     with its cause. No attempt starts after the budget ended, and none is
//     given up in advance: with a 1.5 s budget and a 1 s delay, a server that
//     always answers 503 at once sees exactly 2 attempts, and the call fails
//     at 1.5 s.
//   - Only outcomes that [Policy.Retryable] accepts are retried (by default
//     [DefaultRetryable]: 503 Service Unavailable), only for requests that
//     may be replayed: GET and HEAD by default; other methods only through an
//     explicit opt-in ([Policy.RetryIdempotencyKey],
//     [Policy.RetryIdempotentMethods] or [Policy.UnsafeRetryNonIdempotent]).
//     A retried POST repeats its side effect unless the server can
//     deduplicate it by an Idempotency-Key.
//   - When retries run out, the caller gets the last response or the last
//     error itself, never a wrapper that hides it.
//   - The body of every response that is not returned is drained (at most
//     64 KiB, at most one second) and closed, so no connection stays pinned.
//     The returned response's body keeps its attempt context alive until it
//     is closed or read to EOF.
//   - A request body is replayed with [http.Request.GetBody]; a request
//     whose body cannot be rewound is sent once and a retry is refused with
//     [ErrBodyNotRewindable].
//
// [Policy.DoWithReport] also returns a [Call]: one [Attempt] per call of
// [http.Client.Do], and the [StopReason]. Note that the Transport may itself
// resend a request on a reused HTTP/1 connection (and HTTP/2 does so up to
// several times): such hidden retries do not appear as attempts here; they
// show up only as a server seeing more requests than the report lists.
package retry
