package retry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/retry"
)

// The retry contracts, against a real loopback server and a fresh
// MaxConnsPerHost=1 pool each. They assert server-seen requests and outcome
// classes, never durations; after each, the same pool must still serve /ok.

// guard bounds any wait of these tests, so that a pinned pool fails a test
// instead of hanging it. It is not a timing assertion.
const guard = 10 * time.Second

type loopback struct {
	srv    *faultserver.Server
	tr     *http.Transport
	client *http.Client
}

func newLoopback(t *testing.T) *loopback {
	t.Helper()
	s, err := faultserver.New()
	require.NoError(t, err)
	s.Handle("/ok", faultserver.OK{})
	tr := &http.Transport{MaxConnsPerHost: 1}
	lb := &loopback{srv: s, tr: tr, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		require.NoError(t, s.Close())
	})
	return lb
}

func (lb *loopback) request(t *testing.T, method, path string, body string) *http.Request {
	t.Helper()
	var req *http.Request
	var err error
	if body == "" {
		req, err = http.NewRequest(method, lb.srv.URL()+path, nil)
	} else {
		req, err = http.NewRequest(method, lb.srv.URL()+path, strings.NewReader(body))
	}
	require.NoError(t, err)
	return req
}

// requireHealthy asserts that the pool still serves /ok: no discarded body
// pinned its only connection.
func (lb *loopback) requireHealthy(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lb.srv.URL()+"/ok", nil)
	require.NoError(t, err)
	resp, err := lb.client.Do(req)
	require.NoError(t, err, "the pool must still serve /ok")
	require.Equal(t, "ok", readAll(t, resp))
}

// awaitCancel waits until a handler for path has seen the client go away
// and returned, so that Close finds no handler running.
func (lb *loopback) awaitCancel(t *testing.T, path string) {
	t.Helper()
	select {
	case <-lb.srv.CancelObserved(path):
	case <-time.After(guard):
		t.Fatalf("the server never observed the client going away from %s", path)
	}
}

// contractPolicy is Default with short delays and no jitter.
func contractPolicy() retry.Policy {
	p := retry.Default()
	p.Delay = 10 * time.Millisecond
	p.Backoff = nil
	return p
}

func TestContracts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    faultserver.Fault
		requests int64
		status   int
		body     string
		stop     retry.StopReason
	}{
		{"1 immediate success", faultserver.OK{}, 1, http.StatusOK, "ok", retry.StopFinal},
		{"2 503, 503, success", faultserver.Sequence{Faults: []faultserver.Fault{
			faultserver.Status{Code: 503}, faultserver.Status{Code: 503}, faultserver.OK{},
		}}, 3, http.StatusOK, "ok", retry.StopFinal},
		{"3 503 on every attempt", faultserver.Status{Code: 503}, 3, http.StatusServiceUnavailable, "", retry.StopRetriesExhausted},
		{"4 404", faultserver.Status{Code: 404}, 1, http.StatusNotFound, "", retry.StopFinal},
		{"5 500", faultserver.Status{Code: 500}, 1, http.StatusInternalServerError, "", retry.StopFinal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newLoopback(t)
			lb.srv.Handle("/r", tc.fault)

			resp, rep, err := contractPolicy().DoWithReport(t.Context(), lb.client, lb.request(t, http.MethodGet, "/r", ""))
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "the last response itself reaches the caller")
			require.Equal(t, tc.body, readAll(t, resp))
			require.Equal(t, tc.stop, rep.Stop)
			c := lb.srv.Counters("/r")
			require.EqualValues(t, tc.requests, c.RequestsRead, "server-seen requests")
			require.Len(t, rep.Attempts, int(tc.requests), "client attempts = server-seen requests")
			require.EqualValues(t, 1, c.ConnsAccepted, "every attempt reused the one connection")
			lb.requireHealthy(t)
		})
	}
}

// Contract 6: no response within the attempt limit: a deadline outcome, not
// retried by default, and the server sees the client go away.
func TestContractAttemptDeadline(t *testing.T) {
	lb := newLoopback(t)
	lb.srv.Handle("/hang", faultserver.Hang{})
	p := contractPolicy()
	p.AttemptTimeout = 200 * time.Millisecond

	resp, rep, err := p.DoWithReport(t.Context(), lb.client, lb.request(t, http.MethodGet, "/hang", ""))
	require.Nil(t, resp)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var ne interface{ Timeout() bool }
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	require.Equal(t, retry.StopFinal, rep.Stop)
	require.Len(t, rep.Attempts, 1)
	lb.awaitCancel(t, "/hang")
	require.EqualValues(t, 1, lb.srv.Counters("/hang").RequestsRead)
	lb.requireHealthy(t)
}

// Contract 7: the Transport's ResponseHeaderTimeout, shorter than the attempt
// limit, fires first; its error reaches the caller as is.
func TestContractResponseHeaderTimeout(t *testing.T) {
	lb := newLoopback(t)
	lb.srv.Handle("/hang", faultserver.Hang{})
	lb.tr.ResponseHeaderTimeout = 100 * time.Millisecond
	p := contractPolicy()
	p.AttemptTimeout = 5 * time.Second

	resp, rep, err := p.DoWithReport(t.Context(), lb.client, lb.request(t, http.MethodGet, "/hang", ""))
	require.Nil(t, resp)
	// The message tells it from the attempt deadline: net/http's timeout
	// error also matches context.DeadlineExceeded with errors.Is.
	require.ErrorContains(t, err, "net/http: timeout awaiting response headers")
	var ne interface{ Timeout() bool }
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	require.Equal(t, retry.StopFinal, rep.Stop)
	require.Len(t, rep.Attempts, 1)
	lb.awaitCancel(t, "/hang")
	require.EqualValues(t, 1, lb.srv.Counters("/hang").RequestsRead)
	lb.requireHealthy(t)
}

// The write-safety pair, and the default that protects it: a 503 sent after
// the write committed.
func TestWriteSafety(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      string
		policy   func(*retry.Policy)
		requests int64
		writes   int64
		status   int
	}{
		{"POST is not retried by default", "", nil, 1, 1, http.StatusServiceUnavailable},
		{"unsafe POST retry writes twice", "", func(p *retry.Policy) { p.UnsafeRetryNonIdempotent = true }, 2, 2, http.StatusOK},
		{"POST with Idempotency-Key writes once", "key-1", func(p *retry.Policy) { p.RetryIdempotencyKey = true }, 2, 1, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newLoopback(t)
			lb.srv.Handle("/write", faultserver.Sequence{Faults: []faultserver.Fault{
				faultserver.Write{Status: 503}, faultserver.Write{},
			}})
			p := contractPolicy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			req := lb.request(t, http.MethodPost, "/write", `{"amount":1}`)
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}

			resp, rep, err := p.DoWithReport(t.Context(), lb.client, req)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode)
			readAll(t, resp)
			c := lb.srv.Counters("/write")
			require.EqualValues(t, tc.requests, c.RequestsRead, "server-seen requests")
			require.EqualValues(t, tc.writes, c.WritesCommitted, "committed writes")
			require.Len(t, rep.Attempts, int(tc.requests))
			lb.requireHealthy(t)
		})
	}
}

// The hidden retry: on a kept-alive connection that the server closes after
// reading the request, Go's Transport resends the GET on a new connection by
// itself. The policy made one attempt; the server saw two requests.
func TestHiddenTransportRetry(t *testing.T) {
	lb := newLoopback(t)
	lb.srv.Handle("/close", faultserver.CloseBeforeResponse{After: 1})
	warm, err := lb.client.Do(lb.request(t, http.MethodGet, "/close", ""))
	require.NoError(t, err)
	require.Equal(t, "ok", readAll(t, warm)) // read to EOF: the connection goes idle
	before := lb.srv.Counters("/close")

	resp, rep, err := contractPolicy().DoWithReport(t.Context(), lb.client, lb.request(t, http.MethodGet, "/close", ""))
	require.NoError(t, err)
	require.Equal(t, "ok", readAll(t, resp))
	after := lb.srv.Counters("/close")

	require.Len(t, rep.Attempts, 1, "the policy made one attempt")
	require.EqualValues(t, 2, after.RequestsRead-before.RequestsRead, "the server saw two requests")
	require.EqualValues(t, 2, after.ConnsAccepted, "the resend went over a new connection")
	lb.requireHealthy(t)

	// The handler that cut the first connection may not have returned yet:
	// the client saw the close, resent and finished first. faultserver
	// then reports it as cut by Close; that one handler is expected here.
	var ce *faultserver.CloseError
	if err := lb.srv.Close(); errors.As(err, &ce) {
		require.Equal(t, 1, ce.RunningHandlers, "only the handler that cut the connection")
	} else {
		require.NoError(t, err)
	}
}
