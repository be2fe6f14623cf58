package promconnaudit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// exposition returns, in the text format, what the collector of a pool
// named name must expose for the pool's Stats s.
func exposition(name string, maxConns int, s pool.Stats) string {
	var b strings.Builder
	metric := func(typ, metric, help string, v any, labels ...string) {
		full := "connaudit_pool_" + metric
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", full, help, full, typ)
		fmt.Fprintf(&b, "%s{pool=%q%s} %v\n", full, name, strings.Join(labels, ""), v)
	}
	metric("gauge", "max_open_connections", "The cap on connections per host (MaxConnsPerHost); 0: no cap.", maxConns)
	metric("gauge", "peak_open_connections", "The largest number of connections open at once.", s.MaxOpen)
	metric("gauge", "open_connections", "The number of established connections both in use and idle.", s.Open)
	metric("gauge", "in_use_connections", "The number of connections currently in use.", s.Active)
	metric("gauge", "idle_connections", "The number of idle connections.", s.Idle)
	metric("gauge", "dialing_connections", "The number of dials (connect and TLS handshake) in progress.", s.Dialing)
	metric("counter", "dials_total", "The total number of dials started.", s.Dials)
	metric("counter", "dial_errors_total", "The total number of dials that failed.", s.DialErrors)
	var reasons []string
	for r := range s.ClosedBy {
		reasons = append(reasons, string(r))
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		b.WriteString("# HELP connaudit_pool_closed_total The total number of connections closed, by the side that closed them and why.\n")
		b.WriteString("# TYPE connaudit_pool_closed_total counter\n")
	}
	for _, r := range reasons {
		side := "client"
		switch r {
		case "connection-close", "http1.0-no-keep-alive", "server-closed-idle", "server-eof", "server-reset", "goaway", "protocol-error":
			side = "server"
		}
		fmt.Fprintf(&b, "connaudit_pool_closed_total{pool=%q,reason=%q,side=%q} %d\n", name, r, side, s.ClosedBy[pool.CloseReason(r)])
	}
	metric("counter", "wait_count_total", "The total number of requests not served at once by an idle connection: they waited for a dial or for a connection in use.", s.WaitCount)
	metric("counter", "wait_duration_seconds_total", "The total time requests waited for a connection, dials included.", s.WaitDuration.Seconds())
	metric("gauge", "waiting_requests", "The number of requests waiting for a connection.", s.Waiting)
	metric("counter", "requests_total", "The total number of requests.", s.Requests)
	metric("counter", "reused_requests_total", "The total number of requests served by a connection that had served one before.", s.ReusedRequests)
	metric("gauge", "in_flight_requests", "The number of requests not finished (their body not closed).", s.InFlight)
	metric("gauge", "open_bodies", "The number of response bodies handed out and not closed.", s.OpenBodies)
	return b.String()
}

// TestCollectAndCompare checks, after a run with faults, that the
// collector exposes the pool's Stats, through client_golang's testutil.
func TestCollectAndCompare(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			p := faultRun(t, hold)
			c, err := promconnaudit.NewCollector(p, "api")
			require.NoError(t, err)
			s := p.Stats()
			require.NoError(t, s.Check())
			require.EqualValues(t, 5, s.ClosedBy["early-body-close"])
			require.EqualValues(t, 1, s.ClosedBy["connection-close"])
			require.EqualValues(t, 1, s.ClosedBy["server-eof"], "the hidden retry's first connection")
			if hold {
				require.Equal(t, 1, s.Active)
				require.Equal(t, 1, s.OpenBodies)
			} else {
				require.EqualValues(t, 1, s.ClosedBy["server-closed-idle"])
			}
			require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exposition("api", p.MaxConnsPerHost(), s))))
		})
	}
}

// TestScrape registers two pools' collectors on the default registry and
// scrapes promhttp.Handler over HTTP: the parsed families hold each pool's
// Stats under its name.
func TestScrape(t *testing.T) {
	pools := map[string]*pool.Pool{"held": faultRun(t, true), "drained": faultRun(t, false)}
	for name, p := range pools {
		c, err := promconnaudit.NewCollector(p, name)
		require.NoError(t, err)
		require.NoError(t, prometheus.Register(c))
		defer prometheus.Unregister(c)
	}
	dup, err := promconnaudit.NewCollector(pools["held"], "held")
	require.NoError(t, err)
	require.Error(t, prometheus.Register(dup), "a second collector under a name already registered")

	srv := httptest.NewServer(promhttp.Handler())
	defer srv.Close()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)

	value := func(family, name string, labels ...string) float64 {
		t.Helper()
		f := families[family]
		require.NotNil(t, f, family)
		for _, m := range f.GetMetric() {
			if matches(m, append([]string{"pool", name}, labels...)) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s{pool=%q %v}: no such series", family, name, labels)
		return 0
	}
	for name, p := range pools {
		s := p.Stats()
		require.EqualValues(t, s.Open, value("connaudit_pool_open_connections", name))
		require.EqualValues(t, s.Active, value("connaudit_pool_in_use_connections", name))
		require.EqualValues(t, s.Idle, value("connaudit_pool_idle_connections", name))
		require.EqualValues(t, p.MaxConnsPerHost(), value("connaudit_pool_max_open_connections", name))
		require.EqualValues(t, s.MaxOpen, value("connaudit_pool_peak_open_connections", name))
		require.EqualValues(t, s.WaitCount, value("connaudit_pool_wait_count_total", name))
		require.InDelta(t, s.WaitDuration.Seconds(), value("connaudit_pool_wait_duration_seconds_total", name), 1e-9)
		require.EqualValues(t, s.Requests, value("connaudit_pool_requests_total", name))
		require.EqualValues(t, s.OpenBodies, value("connaudit_pool_open_bodies", name))
		require.EqualValues(t, s.InFlight, value("connaudit_pool_in_flight_requests", name))
		var closed float64
		for r, n := range s.ClosedBy {
			side := "client"
			if r == "connection-close" || r == "server-eof" || r == "server-closed-idle" {
				side = "server"
			}
			require.EqualValues(t, n, value("connaudit_pool_closed_total", name, "reason", string(r), "side", side), r)
			closed += float64(n)
		}
		require.EqualValues(t, s.Closed, closed)
	}
}

// matches reports whether m has the label pairs kv (name, value, …).
func matches(m *dto.Metric, kv []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if have[kv[i]] != kv[i+1] {
			return false
		}
	}
	return true
}

func TestNewCollectorRejects(t *testing.T) {
	_, err := promconnaudit.NewCollector(nil, "api")
	require.ErrorContains(t, err, "nil pool")
	p, err := pool.New()
	require.NoError(t, err)
	defer p.Close()
	for _, name := range []string{"", "\xff"} {
		_, err = promconnaudit.NewCollector(p, name)
		require.ErrorContains(t, err, "non-empty UTF-8")
	}
}
