package retry

import (
	"fmt"
	"net/http"
	"time"
)

// Call is what [Policy.DoWithReport] did: one [Attempt] per call of
// [http.Client.Do], in order, and why it stopped. An audit compares
// len(Attempts) with the requests a server saw: more server-side requests
// than attempts means the Transport resent a request on its own.
type Call struct {
	// Attempts lists the attempts made; it is empty when nothing was sent.
	Attempts []Attempt

	// Stop says why no further attempt was made.
	Stop StopReason
}

// Attempt is the outcome of one attempt. It is an error too: the errors
// [Policy.Do] returns on its own account, after attempts were made, wrap the
// last one, so that
//
//	var last retry.Attempt
//	if errors.As(err, &last) { … last.StatusCode … }
//
// tells what the last attempt got (a 503, say) when the total budget ran
// out in the delay after it.
type Attempt struct {
	// N is the 1-based attempt number, as its timeline carries it
	// ([httptrace.Timeline.Attempt]).
	N int

	// StatusCode is the response status, or 0 when the attempt ended in an
	// error.
	StatusCode int

	// Err is the error of [http.Client.Do], or nil when a response arrived.
	// Errors that happen later, while the caller reads the returned body,
	// are not recorded.
	Err error

	// Retryable is the verdict of the policy's Retryable predicate on this
	// outcome (a request that may not be replayed is not retried anyway).
	Retryable bool

	// Delay is the wait that followed this attempt before the next one
	// (cut short if the budget or the context ended during it); 0 when
	// no retry followed.
	Delay time.Duration
}

// String describes the outcome, e.g. "attempt 2: 503 Service Unavailable".
func (a Attempt) String() string {
	return fmt.Sprintf("attempt %d: %s", a.N, outcome(a.StatusCode, a.Err))
}

// Error is [Attempt.String]: the attempt as part of an error of Do's own.
func (a Attempt) Error() string { return a.String() }

// Unwrap returns the attempt's error, or nil when a response arrived.
func (a Attempt) Unwrap() error { return a.Err }

func outcome(status int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

// StopReason says why [Policy.DoWithReport] made no further attempt.
type StopReason string

// The reasons a retry loop stops.
const (
	// StopFinal: the outcome is final, one the Retryable predicate rejects
	// (a success, or a failure that must not be retried); it is returned.
	StopFinal StopReason = "final"
	// StopRetriesExhausted: MaxRetries retries were made; the last outcome is
	// returned.
	StopRetriesExhausted StopReason = "retries-exhausted"
	// StopBudget: the total budget ran out. During an attempt, that
	// attempt's outcome is returned; during a delay, an error wrapping
	// [context.DeadlineExceeded] and the last [Attempt]. With
	// HonorRetryAfter, a Retry-After that would end after the budget stops
	// at once, and its response is returned.
	StopBudget StopReason = "budget"
	// StopCanceled: the caller's context ended (canceled, or its own
	// deadline passed). If it ended during an attempt, that attempt's
	// outcome is returned; if during a delay, an error wrapping its cause
	// and the last [Attempt].
	StopCanceled StopReason = "canceled"
	// StopNotReplayable: the outcome was retryable but the policy does not
	// allow the request's method to be replayed; the outcome is returned.
	StopNotReplayable StopReason = "not-replayable"
	// StopBodyNotRewindable: a retry was due but the request body could not
	// be rewound; the error wraps [ErrBodyNotRewindable].
	StopBodyNotRewindable StopReason = "body-not-rewindable"
	// StopInvalid: nothing was sent because the policy, client or request
	// was invalid; the error wraps [ErrInvalidPolicy].
	StopInvalid StopReason = "invalid"
)
