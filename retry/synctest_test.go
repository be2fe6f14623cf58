package retry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/retry"
)

// These tests run in virtual time over net.Pipe connections: a second of
// policy time costs no wall-clock time, and "durably blocked" replaces every
// sleep a test would otherwise need to synchronise.

func get(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, pipeURL, nil)
	require.NoError(t, err)
	return req
}

// The caller's own deadline ending during a delay ends the call as the
// total budget does (TestSeed/A8): the delay is waited, not foreseen, and
// the error wraps the deadline and the last attempt.
func TestCallerDeadlineEndsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable))
		pn := newPipeNet(t, srv)
		p := retry.Policy{TotalTimeout: time.Minute, MaxRetries: 2, Delay: time.Second}
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()

		start := time.Now()
		resp, rep, err := p.DoWithReport(ctx, pn.client, get(t))
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var last retry.Attempt
		require.ErrorAs(t, err, &last)
		require.Equal(t, http.StatusServiceUnavailable, last.StatusCode)
		require.Equal(t, 1500*time.Millisecond, time.Since(start))
		require.Equal(t, retry.StopCanceled, rep.Stop)
		require.Len(t, rep.Attempts, 2)
		require.EqualValues(t, 2, srv.requests.Load())
	})
}

// Contract 8, the other half: a delay in progress ends when the context
// does. The caller cancels while Do waits between attempts.
func TestCancelEndsDelayInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable))
		pn := newPipeNet(t, srv)
		p := retry.Policy{TotalTimeout: time.Minute, MaxRetries: 2, Delay: 10 * time.Second}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		type result struct {
			resp *http.Response
			rep  retry.Call
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, rep, err := p.DoWithReport(ctx, pn.client, get(t))
			done <- result{resp, rep, err}
		}()
		synctest.Wait() // everything is blocked: Do waits out its delay
		cancel()
		r := <-done

		require.Nil(t, r.resp)
		require.ErrorIs(t, r.err, context.Canceled)
		require.ErrorContains(t, r.err, "503 Service Unavailable")
		require.Equal(t, retry.StopCanceled, r.rep.Stop)
		require.Len(t, r.rep.Attempts, 1)
		require.EqualValues(t, 1, srv.requests.Load())
	})
}

// Contract 9: the attempt budget restarts. Each attempt takes 400ms of a
// 500ms attempt limit; together with the 200ms delay they take 1s, so a
// budget that did not restart would have failed attempt 2.
func TestAttemptTimeoutRestartsEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(code int) func(http.ResponseWriter, *http.Request) {
			return func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(400 * time.Millisecond) // the handler's work, in virtual time
				status(code)(w, r)
			}
		}
		srv := newScript(slow(http.StatusServiceUnavailable), slow(http.StatusOK))
		pn := newPipeNet(t, srv)
		p := retry.Policy{AttemptTimeout: 500 * time.Millisecond, TotalTimeout: 2 * time.Second, MaxRetries: 2, Delay: 200 * time.Millisecond}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", readAll(t, resp))
		require.Len(t, rep.Attempts, 2)
		require.Equal(t, retry.StopFinal, rep.Stop)
		require.EqualValues(t, 2, srv.requests.Load())
	})
}

// An attempt that hits its own deadline can be retried when the predicate
// says so, while the total budget is still alive; the server sees the
// cancelled attempt end.
func TestAttemptDeadlineRetriedWhenPredicateAllows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(
			func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			status(http.StatusOK),
		)
		pn := newPipeNet(t, srv)
		p := retry.Policy{
			AttemptTimeout: 200 * time.Millisecond, TotalTimeout: time.Second, MaxRetries: 1, Delay: 10 * time.Millisecond,
			Retryable: func(_ *http.Request, _ *http.Response, err error) bool {
				return errors.Is(err, context.DeadlineExceeded)
			},
		}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		require.Equal(t, "ok", readAll(t, resp))
		require.Len(t, rep.Attempts, 2)
		require.ErrorIs(t, rep.Attempts[0].Err, context.DeadlineExceeded)
		require.EqualValues(t, 2, srv.requests.Load())
		require.EqualValues(t, 2, pn.dials.Load(), "the timed-out attempt's connection was closed")
	})
}

// When the total budget ends during an attempt, that attempt's error is
// returned as the client gave it, and nothing more is tried.
func TestTotalBudgetEndsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		pn := newPipeNet(t, srv)
		p := retry.Policy{
			AttemptTimeout: time.Second, TotalTimeout: time.Second, MaxRetries: 3, Delay: 10 * time.Millisecond,
			Retryable: func(*http.Request, *http.Response, error) bool { return true },
		}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, retry.StopBudget, rep.Stop)
		require.Len(t, rep.Attempts, 1)
		require.EqualValues(t, 1, srv.requests.Load())
	})
}

// The same with the default predicate, which retries no error: the stop
// reason is still the budget, and with the caller's own deadline ending
// the attempt, a cancellation; not the predicate's "final".
func TestStopReasonWhenAnAttemptEndsWithTheBudgetOrContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		pn := newPipeNet(t, srv)
		p := retry.Policy{TotalTimeout: time.Second, MaxRetries: 3, Delay: 10 * time.Millisecond}
		_, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, retry.StopBudget, rep.Stop)
		require.Len(t, rep.Attempts, 1)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		p.TotalTimeout = time.Minute
		_, rep, err = p.DoWithReport(ctx, pn.client, get(t))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, retry.StopCanceled, rep.Stop)
		require.Len(t, rep.Attempts, 1)
	})
}

// Exponential backoff, capped: 100, 200, 300 (cap), 300 ms, no jitter.
func TestBackoffDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable))
		pn := newPipeNet(t, srv)
		p := retry.Policy{
			TotalTimeout: 10 * time.Second, MaxRetries: 4, Delay: 100 * time.Millisecond,
			Backoff: &retry.Backoff{Multiplier: 2, Max: 300 * time.Millisecond},
		}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		readAll(t, resp)
		require.Equal(t, retry.StopRetriesExhausted, rep.Stop)
		var delays []time.Duration
		for _, a := range rep.Attempts {
			delays = append(delays, a.Delay)
		}
		ms := time.Millisecond
		require.Equal(t, []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms, 0}, delays)
		require.EqualValues(t, 5, srv.requests.Load())
		require.EqualValues(t, 1, pn.dials.Load(), "every discarded 503 was drained: one connection served all")
	})
}

func TestRetryAfter(t *testing.T) {
	retryAfter := func(v string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", v)
			status(http.StatusServiceUnavailable)(w, r)
		}
	}
	for _, tc := range []struct {
		name       string
		header     string
		honor      bool
		wantStatus int
		wantDelay  time.Duration // after attempt 1
		wantStop   retry.StopReason
	}{
		{"honoured", "2", true, http.StatusOK, 2 * time.Second, retry.StopFinal},
		{"shorter than the delay", "0", true, http.StatusOK, 100 * time.Millisecond, retry.StopFinal},
		{"ignored unless opted in", "2", false, http.StatusOK, 100 * time.Millisecond, retry.StopFinal},
		{"beyond the budget stops at once", "60", true, http.StatusServiceUnavailable, 0, retry.StopBudget},
		{"HTTP-date", "Sat, 01 Jan 2000 00:00:03 GMT", true, http.StatusOK, 3 * time.Second, retry.StopFinal},
		{"malformed is ignored", "soon", true, http.StatusOK, 100 * time.Millisecond, retry.StopFinal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newScript(retryAfter(tc.header), status(http.StatusOK))
				pn := newPipeNet(t, srv)
				p := retry.Policy{TotalTimeout: 10 * time.Second, MaxRetries: 1, Delay: 100 * time.Millisecond, HonorRetryAfter: tc.honor}

				resp, rep, err := p.DoWithReport(t.Context(), pn.client, get(t))
				require.NoError(t, err)
				require.Equal(t, tc.wantStatus, resp.StatusCode)
				readAll(t, resp)
				require.Equal(t, tc.wantStop, rep.Stop)
				require.Equal(t, tc.wantDelay, rep.Attempts[0].Delay)
			})
		})
	}
}

// Each attempt's context carries its 1-based number for the httptrace
// timeline.
func TestAttemptsNumbered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable), status(http.StatusServiceUnavailable), status(http.StatusOK))
		pn := newPipeNet(t, srv)
		var mu sync.Mutex
		var seen []int
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, hook.Attempt(r.Context()))
			mu.Unlock()
			return pn.tr.RoundTrip(r)
		})}

		resp, err := retry.Policy{MaxRetries: 2}.Do(t.Context(), client, get(t))
		require.NoError(t, err)
		require.Equal(t, "ok", readAll(t, resp))
		require.Equal(t, []int{1, 2, 3}, seen)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A discarded body longer than the drain bound is closed unread: its
// connection is closed rather than pinned, and the retry dials a new one.
func TestLongDiscardedBodyClosesConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(make([]byte, 1<<20))
		}, status(http.StatusOK))
		pn := newPipeNet(t, srv)

		resp, err := retry.Policy{MaxRetries: 1}.Do(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		require.Equal(t, "ok", readAll(t, resp))
		require.EqualValues(t, 2, srv.requests.Load())
		require.EqualValues(t, 2, pn.dials.Load())
	})
}

// A discarded body that stalls is drained for a bounded time only, even
// with no attempt or total timeout.
func TestStalledDiscardedBodyBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, status(http.StatusOK))
		pn := newPipeNet(t, srv)

		resp, err := retry.Policy{MaxRetries: 1}.Do(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		require.Equal(t, "ok", readAll(t, resp))
		require.EqualValues(t, 2, pn.dials.Load())
	})
}

// The returned body keeps its attempt alive after Do returns; the attempt
// timeout still bounds reading it.
func TestReturnedBodyLivesWithinAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "first ")
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond) // after Do returned: the body still reads
			_, _ = io.WriteString(w, "second")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until the attempt deadline closes the connection
		})
		pn := newPipeNet(t, srv)
		p := retry.Policy{AttemptTimeout: 500 * time.Millisecond}

		resp, err := p.Do(t.Context(), pn.client, get(t))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.Equal(t, "first second", string(b))
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// Non-idempotent requests are not replayed unless the caller opts in; the
// request body is replayed with GetBody.
func TestReplayRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		key      string
		policy   func(*retry.Policy)
		requests int64
		stop     retry.StopReason
	}{
		{"GET", http.MethodGet, "", nil, 2, retry.StopFinal},
		{"HEAD", http.MethodHead, "", nil, 2, retry.StopFinal},
		{"POST", http.MethodPost, "", nil, 1, retry.StopNotReplayable},
		{"PATCH", http.MethodPatch, "", nil, 1, retry.StopNotReplayable},
		{"PUT", http.MethodPut, "", nil, 1, retry.StopNotReplayable},
		{"DELETE", http.MethodDelete, "", nil, 1, retry.StopNotReplayable},
		{"POST with key, not opted in", http.MethodPost, "k1", nil, 1, retry.StopNotReplayable},
		{"POST with key", http.MethodPost, "k1", func(p *retry.Policy) { p.RetryIdempotencyKey = true }, 2, retry.StopFinal},
		{"POST without key", http.MethodPost, "", func(p *retry.Policy) { p.RetryIdempotencyKey = true }, 1, retry.StopNotReplayable},
		{"PUT, idempotent methods", http.MethodPut, "", func(p *retry.Policy) { p.RetryIdempotentMethods = true }, 2, retry.StopFinal},
		{"POST, idempotent methods", http.MethodPost, "", func(p *retry.Policy) { p.RetryIdempotentMethods = true }, 1, retry.StopNotReplayable},
		{"PATCH, unsafe", http.MethodPatch, "", func(p *retry.Policy) { p.UnsafeRetryNonIdempotent = true }, 2, retry.StopFinal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newScript(status(http.StatusServiceUnavailable), status(http.StatusOK))
				pn := newPipeNet(t, srv)
				p := retry.Policy{MaxRetries: 1}
				if tc.policy != nil {
					tc.policy(&p)
				}
				var body io.Reader
				if tc.method != http.MethodGet && tc.method != http.MethodHead {
					body = strings.NewReader("payload")
				}
				req, err := http.NewRequest(tc.method, pipeURL, body)
				require.NoError(t, err)
				if tc.key != "" {
					req.Header.Set("Idempotency-Key", tc.key)
				}

				resp, rep, err := p.DoWithReport(t.Context(), pn.client, req)
				require.NoError(t, err)
				readAll(t, resp)
				require.Equal(t, tc.stop, rep.Stop)
				require.EqualValues(t, tc.requests, srv.requests.Load())
				// One connection served every attempt: each discarded body was
				// drained, and no attempt sent a spent body that the Transport
				// had to resend on a new connection (its hidden retry).
				require.EqualValues(t, 1, pn.dials.Load())
				if body != nil {
					for _, got := range srv.seen() {
						require.Equal(t, "payload", got, "every attempt sends the whole body")
					}
				}
			})
		})
	}
}

// A body that cannot be rewound is sent once, and the retry is refused with
// a clear error.
func TestBodyNotRewindable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable), status(http.StatusOK))
		pn := newPipeNet(t, srv)
		req, err := http.NewRequest(http.MethodPost, pipeURL, io.NopCloser(strings.NewReader("payload")))
		require.NoError(t, err)
		require.Nil(t, req.GetBody)
		p := retry.Policy{MaxRetries: 2, UnsafeRetryNonIdempotent: true}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, retry.ErrBodyNotRewindable)
		require.ErrorContains(t, err, "GetBody is nil")
		require.ErrorContains(t, err, "503 Service Unavailable")
		require.Equal(t, retry.StopBodyNotRewindable, rep.Stop)
		require.Len(t, rep.Attempts, 1)
		require.EqualValues(t, 1, srv.requests.Load())
		require.EqualValues(t, 1, pn.dials.Load())
	})
}

func TestGetBodyFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable), status(http.StatusOK))
		pn := newPipeNet(t, srv)
		req, err := http.NewRequest(http.MethodPut, pipeURL, strings.NewReader("payload"))
		require.NoError(t, err)
		broken := errors.New("spool gone")
		req.GetBody = func() (io.ReadCloser, error) { return nil, broken }
		p := retry.Policy{MaxRetries: 2, RetryIdempotentMethods: true}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, retry.ErrBodyNotRewindable)
		require.ErrorIs(t, err, broken)
		require.Equal(t, retry.StopBodyNotRewindable, rep.Stop)
		require.EqualValues(t, 1, srv.requests.Load())
	})
}

// An invalid policy sends nothing, and closes the request body as
// http.Client.Do would.
func TestInvalidPolicySendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusOK))
		pn := newPipeNet(t, srv)
		body := &closeRecorder{Reader: strings.NewReader("payload")}
		req, err := http.NewRequest(http.MethodPost, pipeURL, body)
		require.NoError(t, err)
		p := retry.Policy{AttemptTimeout: 2 * time.Second, TotalTimeout: time.Second}

		resp, rep, err := p.DoWithReport(t.Context(), pn.client, req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, retry.ErrInvalidPolicy)
		require.Equal(t, retry.StopInvalid, rep.Stop)
		require.Empty(t, rep.Attempts)
		require.True(t, body.closed)
		require.EqualValues(t, 0, srv.requests.Load())
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// The caller cancelling during an attempt ends it; that attempt's error is
// returned as is and nothing more is tried, whatever the predicate says.
func TestCancelDuringAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		pn := newPipeNet(t, srv)
		p := retry.Policy{
			TotalTimeout: time.Minute, MaxRetries: 3,
			Retryable: func(*http.Request, *http.Response, error) bool { return true },
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		done := make(chan error, 1)
		go func() {
			resp, rep, err := p.DoWithReport(ctx, pn.client, get(t))
			if resp != nil {
				resp.Body.Close()
			}
			if err == nil || rep.Stop != retry.StopCanceled || len(rep.Attempts) != 1 {
				t.Errorf("got err %v, stop %q, %d attempts; want an error, canceled, 1 attempt", err, rep.Stop, len(rep.Attempts))
			}
			done <- err
		}()
		synctest.Wait() // the handler holds the only attempt
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		require.EqualValues(t, 1, srv.requests.Load())
	})
}

func TestDoErrorsReadWell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newScript(status(http.StatusServiceUnavailable))
		pn := newPipeNet(t, srv)
		req, err := http.NewRequest(http.MethodGet, pipeURL, io.NopCloser(strings.NewReader("x")))
		require.NoError(t, err)

		_, err = retry.Policy{MaxRetries: 1}.Do(t.Context(), pn.client, req)
		require.EqualError(t, err, "retry: request body cannot be rewound for a retry: Request.GetBody is nil; attempt 1: 503 Service Unavailable")
	})
}
