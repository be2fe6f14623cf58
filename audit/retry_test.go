package audit_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/retry"
)

func retryContracts(t *testing.T) []audit.Scenario {
	t.Helper()
	all, err := audit.Select(audit.Catalogue(), "^retry/", "")
	require.NoError(t, err)
	return all
}

// Every retry scenario names its contract, and every contract of the
// issue has a scenario.
func TestRetryScenariosNameTheirContracts(t *testing.T) {
	var ids []string
	for _, s := range retryContracts(t) {
		require.NotEmpty(t, s.Contract, s.Name)
		ids = append(ids, s.Contract)
	}
	require.Equal(t, []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "W1", "W2", "W3", "W4", "H1", "H1", "H2", "P1"}, ids)
	for _, s := range audit.Catalogue() {
		if !strings.HasPrefix(s.Name, "retry/") {
			require.Empty(t, s.Contract, s.Name)
		}
	}
}

// The reference, given as a user's layer would be (Policy.Do), holds every
// contract, and the total budget ends the call during the second delay.
func TestReferenceThroughWithRetry(t *testing.T) {
	r, err := audit.NewRunner(audit.WithRetry("retry.Policy.Do", func(p retry.Policy) (audit.RetryFunc, error) { return p.Do, nil }))
	require.NoError(t, err)
	rep := r.Run(context.Background(), retryContracts(t))
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.True(t, rep.OK(), text.String())
	require.Equal(t, "retry.Policy.Do", rep.Retry)
	require.Contains(t, text.String(), "; retry: retry.Policy.Do")

	for _, res := range rep.Results {
		switch res.Contract {
		case "A8":
			require.Equal(t, "deadline", string(res.Observed.Class))
			require.Equal(t, 2, res.Observed.ClientAttempts)
			require.EqualValues(t, 2, res.Observed.ServerRequests)
			require.Contains(t, res.Observed.Error, "total budget of 450ms ran out waiting to retry")
			require.Len(t, res.Observed.Attempts, 2, "every attempt's timeline")
		case "W2":
			require.Equal(t, []string{"order-7", "order-7"}, res.Observed.Keys)
		case "W3":
			require.Equal(t, []string{"order-7-attempt-1", "order-7-attempt-2"}, res.Observed.Keys)
			require.EqualValues(t, 2, res.Observed.Writes)
		}
	}
}

// A layer that retries every 5xx and every method, with no total budget:
// the contracts it breaks fail, each verdict naming the contract and what
// was observed; the one it cannot be set up for is not configurable, and
// does not fail the report.
func TestUserRetryLayerJudged(t *testing.T) {
	var configured atomic.Int64
	layer := func(p retry.Policy) (audit.RetryFunc, error) {
		configured.Add(1)
		if p.TotalTimeout > 0 && p.TotalTimeout < p.AttemptTimeout*2 {
			return nil, errors.New("no total budget")
		}
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			var resp *http.Response
			var err error
			for i := 0; i <= p.MaxRetries; i++ {
				if resp != nil {
					resp.Body.Close()
				}
				if req.GetBody != nil {
					req.Body, _ = req.GetBody()
				}
				if resp, err = c.Do(req.WithContext(ctx)); err != nil || resp.StatusCode < 500 {
					break
				}
			}
			return resp, err
		}, nil
	}
	r, err := audit.NewRunner(audit.WithRetry("greedy", layer))
	require.NoError(t, err)
	var picked []audit.Scenario
	for _, s := range retryContracts(t) {
		switch s.Contract {
		case "A2", "A5", "A8", "W4":
			picked = append(picked, s)
		}
	}
	rep := r.Run(context.Background(), picked)
	require.EqualValues(t, 4, configured.Load())
	byID := map[string]audit.Result{}
	for _, res := range rep.Results {
		byID[res.Contract] = res
	}
	require.True(t, byID["A2"].Pass, "%v", byID["A2"].Mismatches)
	require.False(t, byID["A5"].Pass)
	require.Contains(t, byID["A5"].Mismatches, "A5: 500 was retried: 3 requests, contract 1")
	require.Contains(t, byID["W4"].Mismatches, "W4: the POST was retried: 2 requests, contract 1")
	require.Contains(t, byID["W4"].Mismatches, "W4: the server committed 2 writes, contract 1")
	require.Equal(t, "no total budget", byID["A8"].NotConfigurable)
	require.False(t, byID["A8"].Pass)
	require.Empty(t, byID["A8"].Mismatches)
	require.Equal(t, 1, rep.Passed)
	require.Equal(t, 2, rep.Failed)
	require.Equal(t, 1, rep.NotConfigurable)

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	out := text.String()
	require.Regexp(t, `retry/total-budget +not configurable +- +- +- +N/A\n  - no total budget\n`, out)
	require.Contains(t, out, "  fix: in the retry layer: retry 503 only (a nil Retryable): 500 is final")
	require.Contains(t, out, "1 passed, 2 failed, 1 not configurable in ")
	text.Reset()
	require.NoError(t, rep.WriteText(&text, true))
	out = text.String()
	require.Contains(t, out, "  server: 2 requests, 2 writes committed; idempotency keys received: none")
	require.Contains(t, out, "  attempt 2 of 2:\n    POST http://")

	suites := junitOf(t, rep)
	require.Equal(t, 1, suites.Suites[0].Skipped)
}

// A layer that panics, or whose configure panics or returns nothing, is
// reported, not crashed on.
func TestBrokenRetryLayers(t *testing.T) {
	a1 := retryContracts(t)[0]
	for _, tc := range []struct {
		name, notConfigurable, mismatch string
		layer                           func(retry.Policy) (audit.RetryFunc, error)
	}{
		{name: "configure panics", notConfigurable: "configuring the retry layer panicked: boom",
			layer: func(retry.Policy) (audit.RetryFunc, error) { panic("boom") }},
		{name: "no function", notConfigurable: "the retry layer's configure returned no function",
			layer: func(retry.Policy) (audit.RetryFunc, error) { return nil, nil }},
		{name: "call panics", mismatch: "A1: no faulted request was recorded",
			layer: func(retry.Policy) (audit.RetryFunc, error) {
				return func(context.Context, *http.Client, *http.Request) (*http.Response, error) { panic("boom") }, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := audit.NewRunner(audit.WithRetry(tc.name, tc.layer))
			require.NoError(t, err)
			res := r.RunOne(context.Background(), a1)
			require.False(t, res.Pass)
			require.Equal(t, tc.notConfigurable, res.NotConfigurable)
			if tc.mismatch != "" {
				require.Contains(t, res.Mismatches, tc.mismatch)
			}
		})
	}
	_, err := audit.NewRunner(audit.WithRetry("x", nil))
	require.Error(t, err)
	_, err = audit.NewRunner(audit.WithRetry("", func(p retry.Policy) (audit.RetryFunc, error) { return p.Do, nil }))
	require.Error(t, err)
}

// A layer that ignores the attempt limit and retries every error, on a
// transport whose ResponseHeaderTimeout ends each attempt: the call
// outlasts the guard. The verdict names the layer, not the transport: it
// retried what it must not, and went on after its context had ended.
func TestRetryLayerPastItsBounds(t *testing.T) {
	var a6 audit.Scenario
	for _, s := range retryContracts(t) {
		if s.Contract == "A6" {
			a6 = s
		}
	}
	stubborn := func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		var err error
		for range 1000 {
			var resp *http.Response
			if resp, err = c.Do(req.Clone(ctx)); err == nil {
				return resp, nil
			}
		}
		return nil, err
	}
	r, err := audit.NewRunner(
		audit.WithTransport("header bound 300ms", func() *http.Transport {
			return &http.Transport{ResponseHeaderTimeout: 300 * time.Millisecond}
		}),
		audit.WithRetry("stubborn", func(retry.Policy) (audit.RetryFunc, error) { return stubborn, nil }),
		audit.GuardDeadline(time.Second))
	require.NoError(t, err)
	res := r.RunOne(context.Background(), a6)
	require.False(t, res.Pass)
	require.True(t, res.Observed.Unbounded)
	require.Equal(t, httptrace.Stage("await-headers"), res.Observed.UnboundedStage, "the stage of the attempt in flight, not of the last")
	require.Equal(t, 1000, res.Observed.ClientAttempts, "once its context ended, every attempt failed at once")
	var unbounded, late string
	for _, m := range res.Mismatches {
		switch {
		case strings.HasPrefix(m, "unbounded: "):
			unbounded = m
		case strings.HasPrefix(m, "retry layer: "):
			late = m
		}
	}
	require.Regexp(t, `^unbounded: the call had not ended within 4s \(the scenario's guard, then the guard deadline, 1s, `+
		`and half again\), waiting for the retry layer under audit: attempt \d+ of 1000 was at stage await-headers$`, unbounded)
	require.Regexp(t, `^retry layer: \d+ attempts after the call's context had ended$`, late)
	require.Contains(t, res.Fix, "in the retry layer: bound each attempt by AttemptTimeout")
	require.Contains(t, res.Fix, "check ctx.Err() before each attempt")
	require.NotContains(t, res.Fix, "set ResponseHeaderTimeout", "the transport has one")
	require.NotContains(t, res.Fix, "GuardDeadline", "the transport's bound is shorter than the guard")
}

// The contracts taken from Reactor Netty's (A7, A10, W1, W2, H2, P1's cancel) fail under a layer that breaks
// them: one that retries every error, reading the body itself (A7, A10, H2,
// and P1's cancel), and one that hands the caller a response whose body it
// has already read (W1, W2: the writes the server reports are lost).
func TestRetryContractsCanFail(t *testing.T) {
	everyError := func(p retry.Policy) (audit.RetryFunc, error) {
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			var err error
			for range p.MaxRetries + 1 {
				var resp *http.Response
				if resp, err = c.Do(req.WithContext(ctx)); err != nil {
					continue
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil {
					resp.Body = io.NopCloser(bytes.NewReader(b))
					return resp, nil
				}
				err = rerr
			}
			return nil, err
		}, nil
	}
	bodyRead := func(p retry.Policy) (audit.RetryFunc, error) {
		do := p.Do
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			resp, err := do(ctx, c, req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
			}
			return resp, err
		}, nil
	}
	for _, tc := range []struct {
		id, mismatch string
		layer        func(retry.Policy) (audit.RetryFunc, error)
	}{
		{"A7", "A7: the header wait timeout was retried: 3 requests, contract 1", everyError},
		{"A10", "A10: the body read timeout was retried: 3 requests, contract 1", everyError},
		{"H2", "H2: the GET was retried: 3 requests, contract 1", everyError},
		{"P1", "P1: client attempts: expected 1, observed 3", everyError},
		{"W1", `run: the caller read the body "", where the server reported "writes committed: 2"`, bodyRead},
		{"W2", `run: the caller read the body "", where the server reported "writes committed: 1"`, bodyRead},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var s audit.Scenario
			for _, c := range retryContracts(t) {
				if c.Contract == tc.id {
					s = c
				}
			}
			r, err := audit.NewRunner(audit.WithRetry("broken", tc.layer))
			require.NoError(t, err)
			res := r.RunOne(context.Background(), s)
			require.False(t, res.Pass)
			require.Contains(t, res.Mismatches, tc.mismatch)
		})
	}
}

// A layer audited at its defaults is named so in the report, and its fix
// says what to configure; one configured for the contracts is told which
// policy field it does not apply.
func TestRetryRows(t *testing.T) {
	var a3 []audit.Scenario
	for _, s := range retryContracts(t) {
		if s.Contract == "A3" {
			a3 = append(a3, s)
		}
	}
	fixed := func(base http.RoundTripper, _ retry.Policy) (http.RoundTripper, error) {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			for attempt := 0; ; attempt++ {
				resp, err := base.RoundTrip(req)
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == 4 {
					return resp, err
				}
				resp.Body.Close()
			}
		}), nil
	}
	for _, tc := range []struct {
		opts           []audit.Option
		row, says, fix string
	}{
		{nil, "configured", "A3: 5 attempts where MaxRetries=2 allows 3: the layer does not apply MaxRetries",
			"in the retry layer: apply MaxRetries: stop after 2 retries"},
		{[]audit.Option{audit.RetryAtDefaults()}, "defaults",
			"A3: 5 attempts where MaxRetries=2 allows 3: at its defaults the layer retries more",
			"configure the retry layer (it runs at its defaults) to make at most 2 retries (3 attempts)"},
	} {
		r, err := audit.NewRunner(append(tc.opts, audit.WithRetryTransport("five attempts", fixed))...)
		require.NoError(t, err)
		rep := r.Run(t.Context(), a3)
		require.Equal(t, tc.row, rep.RetryRow)
		res := rep.Results[0]
		require.False(t, res.Pass)
		require.Contains(t, res.Mismatches, tc.says)
		require.True(t, strings.HasPrefix(res.Fix, tc.fix), res.Fix)
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text, false))
		require.Contains(t, strings.ReplaceAll(text.String(), "\n    ", " "), "; retry: five attempts ("+tc.row+")")
	}
	r, err := audit.NewRunner()
	require.NoError(t, err)
	require.Empty(t, r.Run(t.Context(), a3).RetryRow, "package retry, the reference, has no row")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A layer that reads a retried response to its end but never closes it
// made that attempt all the same: it is counted, and said so, rather than
// taken for a hidden retry of the Transport's.
func TestAttemptsNeverClosedAreCounted(t *testing.T) {
	var a3 audit.Scenario
	for _, s := range retryContracts(t) {
		if s.Contract == "A3" {
			a3 = s
		}
	}
	leaky := func(p retry.Policy) (audit.RetryFunc, error) {
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			resp, err := c.Do(req.WithContext(ctx))
			if err != nil {
				return nil, err
			}
			io.Copy(io.Discard, resp.Body) // read to its end, never closed
			return c.Do(req.WithContext(ctx))
		}, nil
	}
	r, err := audit.NewRunner(audit.WithRetry("leaky", leaky))
	require.NoError(t, err)
	res := r.RunOne(t.Context(), a3)
	require.Equal(t, 2, res.Observed.ClientAttempts, "%v", res.Mismatches)
	require.EqualValues(t, 2, res.Observed.ServerRequests)
	require.False(t, res.Observed.HiddenRetry, "the server saw no more requests than the layer made")
	require.Contains(t, res.Observed.Notes, "1 attempt of 2 never finished: their bodies were not closed")
	require.True(t, slices.ContainsFunc(res.Mismatches, func(m string) bool { return strings.Contains(m, "open body") }),
		"%v", res.Mismatches)
}

// A layer that applies MaxRetries but not the total budget makes the
// attempts MaxRetries allows, one more than the budget and the delay
// allow: A8 says both numbers and where each comes from, not a bare
// "expected 2, observed 3" that reads as too many retries.
func TestBudgetVerdictSaysWhereEachNumberComes(t *testing.T) {
	var a8 audit.Scenario
	for _, s := range retryContracts(t) {
		if s.Contract == "A8" {
			a8 = s
		}
	}
	retries := 0 // 0: the policy's MaxRetries
	noBudget := func(p retry.Policy) (audit.RetryFunc, error) {
		limit := p.MaxRetries
		if retries > 0 {
			limit = retries
		}
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			for attempt := 0; ; attempt++ {
				resp, err := c.Do(req.WithContext(ctx))
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == limit {
					return resp, err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				delay := time.NewTimer(p.Delay) // the layer's own delay, which it does not count
				select {
				case <-delay.C:
				case <-ctx.Done():
					delay.Stop()
					return nil, ctx.Err()
				}
			}
		}, nil
	}
	r, err := audit.NewRunner(audit.WithRetry("no budget", noBudget))
	require.NoError(t, err)
	res := r.RunOne(t.Context(), a8)
	require.False(t, res.Pass)
	require.Equal(t, 3, res.Observed.ClientAttempts, "%v", res.Mismatches)
	require.Contains(t, res.Mismatches, "A8: 3 attempts, which MaxRetries=2 allows, where the budget allows 2: "+
		"TotalTimeout (450ms) ends during the delay (300ms) before attempt 3")
	for _, m := range res.Mismatches {
		require.NotContains(t, m, "client attempts: expected")
	}
	require.True(t, strings.HasPrefix(res.Fix, "in the retry layer: apply TotalTimeout (450ms)"), res.Fix)

	// A layer that applies neither limit: both numbers, and that neither
	// is applied.
	retries = 3
	r, err = audit.NewRunner(audit.WithRetry("no limit", noBudget))
	require.NoError(t, err)
	res = r.RunOne(t.Context(), a8)
	require.False(t, res.Pass)
	require.Equal(t, 4, res.Observed.ClientAttempts, "%v", res.Mismatches)
	require.Contains(t, res.Mismatches, "A8: 4 attempts, where the budget allows 2 (TotalTimeout (450ms) ends during "+
		"the delay (300ms) before attempt 3) and MaxRetries=2 allows 3: the layer applies neither")
	for _, m := range res.Mismatches {
		require.NotContains(t, m, "client attempts: expected")
	}
}
