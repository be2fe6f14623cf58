//lint:file-ignore SA1019 x/net's http2.Transport is deprecated, not gone: clients still use it, and it is audited as it is.

package audit_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// headerAdder is a service's own RoundTripper: it adds a header to each
// request and counts them, then sends it through next. It has no Unwrap
// method; unwrapping adds one.
type headerAdder struct {
	next  http.RoundTripper
	trips *atomic.Int64
}

func (h headerAdder) RoundTrip(req *http.Request) (*http.Response, error) {
	h.trips.Add(1)
	req = req.Clone(req.Context())
	req.Header.Set("X-Service", "orders")
	return h.next.RoundTrip(req)
}

// unwrapping is headerAdder with the Unwrap method the audit looks for.
type unwrapping struct{ headerAdder }

func (u unwrapping) Unwrap() http.RoundTripper { return u.next }

// runEach runs the named scenarios with r and returns their results by
// name.
func runEach(t *testing.T, r *audit.Runner, names ...string) map[string]audit.Result {
	t.Helper()
	var ss []audit.Scenario
	for _, name := range names {
		ss = append(ss, scenario(t, name))
	}
	out := map[string]audit.Result{}
	for _, res := range r.Run(context.Background(), ss).Results {
		out[res.Name] = res
	}
	return out
}

func hasNote(res audit.Result, prefix string) bool {
	for _, n := range res.Observed.Notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func http2Only() http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	return p
}

// A bare x/net http2.Transport is audited: its connections are tracked
// through the DialTLSContext the runner wraps, so the dials and the
// connection's fate are judged; its bounds are its own (no header wait),
// and the fix says so in its terms.
func TestAuditXNetHTTP2Transport(t *testing.T) {
	r, err := audit.NewRunner(audit.WithRoundTripper("x/net http2", func() http.RoundTripper {
		return &http2.Transport{}
	}), audit.Protocols(http2Only()), audit.Parallel(4))
	require.NoError(t, err)
	res := runEach(t, r, "ok", "h2/ok", "h2/reset", "h2/goaway", "h2/refused-stream", "h2/response-header-timeout",
		"retry/response-header-timeout")

	require.Contains(t, res["ok"].Skipped, "HTTP/1 is not meant")
	for _, name := range []string{"h2/ok", "h2/reset", "h2/goaway", "h2/refused-stream"} {
		require.True(t, res[name].Pass, "%s: %v", name, res[name].Mismatches)
		require.True(t, hasNote(res[name], "sees: an x/net http2.Transport"), "%s: %v", name, res[name].Observed.Notes)
	}
	require.EqualValues(t, 1, res["h2/ok"].Observed.Dials, "its one connection was tracked")
	require.True(t, res["h2/ok"].Observed.Fate.Reused)
	require.Equal(t, httptrace.ClassStreamReset, res["h2/reset"].Observed.Class)
	// x/net sends a request again on a new connection, by itself, after a
	// GOAWAY that left it unprocessed, and after REFUSED_STREAM.
	for _, name := range []string{"h2/goaway", "h2/refused-stream"} {
		o := res[name].Observed
		require.True(t, o.HiddenRetry, name)
		require.EqualValues(t, 2, o.ServerRequests, name)
		require.Equal(t, 1, o.ClientAttempts, name)
	}
	require.EqualValues(t, 2, res["h2/goaway"].Observed.Dials)

	// Its health check closes a connection that went dark, and the pool
	// names it so, by x/net's settings.
	r, err = audit.NewRunner(audit.WithRoundTripper("x/net http2", func() http.RoundTripper {
		return &http2.Transport{ReadIdleTimeout: 300 * time.Millisecond, PingTimeout: 300 * time.Millisecond}
	}), audit.Protocols(http2Only()))
	require.NoError(t, err)
	dark := runEach(t, r, "h2/go-dark")["h2/go-dark"]
	require.True(t, dark.Pass, "%v", dark.Mismatches)
	require.Equal(t, pool.ClosedByClient, dark.Observed.Fate.ClosedBy)
	require.Equal(t, pool.ReasonPingTimeout, dark.Observed.Fate.Reason)

	// A health check of a service's seconds, past the scenario's own
	// guard and within the guard deadline, is waited for: it ends the
	// request on the dark connection, which is no unbounded wait.
	r, err = audit.NewRunner(audit.WithRoundTripper("x/net http2", func() http.RoundTripper {
		return &http2.Transport{ReadIdleTimeout: 2 * time.Second, PingTimeout: 2 * time.Second}
	}), audit.Protocols(http2Only()))
	require.NoError(t, err)
	dark = runEach(t, r, "h2/go-dark")["h2/go-dark"]
	require.True(t, dark.Pass, "%v; fix %s", dark.Mismatches, dark.Fix)
	require.False(t, dark.Observed.Unbounded)
	require.Equal(t, pool.ReasonPingTimeout, dark.Observed.Fate.Reason)

	// A7 over x/net names what x/net lacks, not a field it has not.
	a7 := res["retry/response-header-timeout"]
	require.False(t, a7.Pass)
	require.Contains(t, a7.Fix, "x/net's http2.Transport has no bound on the wait for the response headers")
	require.NotContains(t, a7.Fix, "ResponseHeaderTimeout must end")

	rht := res["h2/response-header-timeout"]
	require.False(t, rht.Pass)
	require.True(t, rht.Observed.Unbounded)
	require.Contains(t, rht.Fix, "x/net's http2.Transport has no bound on the wait for the response headers")
}

// A service's chain around an *http.Transport: with an Unwrap method the
// transport inside is tracked in place and its bounds seen; without one
// nothing is, and the report says which. Every request goes through the
// chain either way.
func TestAuditWrappedTransport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unwrap bool
	}{{"with Unwrap", true}, {"without Unwrap", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var trips atomic.Int64
			r, err := audit.NewRunner(audit.WithRoundTripper("orders", func() http.RoundTripper {
				h := headerAdder{next: &http.Transport{ResponseHeaderTimeout: 150 * time.Millisecond}, trips: &trips}
				if tc.unwrap {
					return unwrapping{h}
				}
				return h
			}), audit.GuardDeadline(time.Second), audit.Parallel(4))
			require.NoError(t, err)
			res := runEach(t, r, "ok", "response-header-timeout", "cancel-waiting-for-conn", "h2/ok", "server-idle-timeout")
			require.Positive(t, trips.Load(), "the requests went through the chain")

			ok, rht := res["ok"], res["response-header-timeout"]
			require.True(t, ok.Pass, "%v", ok.Mismatches)
			require.True(t, rht.Pass, "the transport's own 150ms ended the header wait: %v", rht.Mismatches)
			if tc.unwrap {
				// Its IdleConnTimeout, none, is seen and judged.
				idle := res["server-idle-timeout"]
				require.False(t, idle.Pass)
				require.Contains(t, idle.Mismatches[0], "IdleConnTimeout (yours: none)")
				delete(res, "server-idle-timeout")
				for name, res := range res {
					require.True(t, res.Pass, "%s: %v %s", name, res.Mismatches, res.Skipped)
					require.True(t, hasNote(res, "sees: the *http.Transport inside audit_test.unwrapping"), "%s: %v", name, res.Observed.Notes)
				}
				require.EqualValues(t, 1, ok.Observed.Dials)
				require.True(t, ok.Observed.Fate.Reused)
				return
			}
			const sees = "sees: no transport inside audit_test.headerAdder (no Unwrap() http.RoundTripper method): " +
				"bounds unseen, waited for up to the guard deadline (1s); connections unseen"
			require.True(t, hasNote(ok, sees), "%v", ok.Observed.Notes)
			require.Zero(t, ok.Observed.Dials, "no connection is tracked, and none is judged")
			require.True(t, hasNote(rht, "await-headers ended by the client after"), "%v", rht.Observed.Notes)
			for _, name := range []string{"cancel-waiting-for-conn", "h2/ok"} {
				require.Contains(t, res[name].Skipped, "the audit sees no transport inside the RoundTripper", name)
				require.Contains(t, res[name].Fix, "Unwrap() http.RoundTripper", name)
			}
			// Its IdleConnTimeout is not seen: not judged, rather than
			// taken for none.
			idle := res["server-idle-timeout"]
			require.True(t, idle.Pass, "%v", idle.Mismatches)
		})
	}
}

// An HTTP/2-only client has its retry verdicts: the contracts run over
// HTTP/2, with what each expects there, measured: an attempt that ends
// leaves the connection in use (its stream reset), and a server's reset
// is a stream's that net/http does not send again.
func TestRetryContractsOverHTTP2(t *testing.T) {
	contracts, err := audit.Select(audit.Catalogue(), "^retry/", "")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		opts []audit.Option
		// fail are the contracts the client breaks.
		fail []string
	}{
		{name: "reference"},
		// x/net's http2.Transport has no header wait bound: the attempt
		// limit ends A7's attempt, and nothing turns a stalled body into
		// A10's error but the attempt limit.
		{name: "x/net http2", opts: []audit.Option{audit.WithRoundTripper("x/net http2", func() http.RoundTripper {
			return &http2.Transport{}
		})}, fail: []string{"retry/response-header-timeout", "retry/body-read-interval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := audit.NewRunner(append(tc.opts, audit.Protocols(http2Only()), audit.Parallel(4))...)
			require.NoError(t, err)
			rep := r.Run(context.Background(), contracts)
			res := map[string]audit.Result{}
			for _, got := range rep.Results {
				res[got.Name] = got
				require.Equal(t, audit.HTTP2, got.Proto, got.Name)
				require.Empty(t, got.Skipped, got.Name)
				require.True(t, hasNote(got, "run over HTTP/2"), got.Name)
				require.Equal(t, !slices.Contains(tc.fail, got.Name), got.Pass, "%s: %v", got.Name, got.Mismatches)
			}
			require.Equal(t, len(contracts)-len(tc.fail), rep.Passed)

			o := res["retry/503-503-ok"].Observed
			require.Equal(t, 3, o.ClientAttempts)
			require.EqualValues(t, 3, o.ServerRequests)
			require.EqualValues(t, 1, o.Dials, "every attempt on the one connection")
			for _, name := range []string{"retry/attempt-deadline", "retry/cancel-in-attempt"} {
				require.True(t, res[name].Observed.Fate.Reused, "%s: %s", name, res[name].Observed.Fate)
			}
			for _, name := range []string{"retry/hidden-retry", "retry/hidden-retry-reset"} {
				o := res[name].Observed
				require.False(t, o.HiddenRetry, name)
				require.EqualValues(t, 1, o.ServerRequests, name)
			}
			require.Equal(t, httptrace.ClassServerClosed, res["retry/hidden-retry"].Observed.Class)
			require.Equal(t, httptrace.ClassStreamReset, res["retry/hidden-retry-reset"].Observed.Class)
		})
	}
}
