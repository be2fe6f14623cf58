package promconnaudit_test

import (
	"fmt"
	"net"
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
// named name must expose for the pool's HostStats hosts, each under its
// own server_address and server_port.
func exposition(name string, maxConns int, hosts map[string]pool.Stats) string {
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	var b strings.Builder
	metric := func(typ, metric, help string, value func(pool.Stats) any) {
		full := "connaudit_pool_" + metric
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", full, help, full, typ)
		for _, h := range names {
			addr, port, _ := net.SplitHostPort(h)
			fmt.Fprintf(&b, "%s{pool=%q,server_address=%q,server_port=%q} %v\n", full, name, addr, port, value(hosts[h]))
		}
	}
	histogram := func(metric, help string, value func(pool.Stats) pool.Histogram) {
		full := "connaudit_pool_" + metric
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s histogram\n", full, help, full)
		for _, h := range names {
			addr, port, _ := net.SplitHostPort(h)
			labels := fmt.Sprintf("pool=%q,server_address=%q,server_port=%q", name, addr, port)
			hist := value(hosts[h])
			var n int64
			for i, le := range pool.DurationBuckets() {
				if hist.Count > 0 {
					n += hist.Buckets[i]
				}
				fmt.Fprintf(&b, "%s_bucket{%s,le=\"%v\"} %d\n", full, labels, le.Seconds(), n)
			}
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d\n", full, labels, hist.Count)
			fmt.Fprintf(&b, "%s_sum{%s} %v\n", full, labels, hist.Sum.Seconds())
			fmt.Fprintf(&b, "%s_count{%s} %d\n", full, labels, hist.Count)
		}
	}
	metric("gauge", "max_open_connections", "The cap on connections to the host (MaxConnsPerHost); 0: no cap.", func(pool.Stats) any { return maxConns })
	metric("gauge", "peak_open_connections", "The largest number of connections open to the host at once.", func(s pool.Stats) any { return s.MaxOpen })
	metric("gauge", "open_connections", "The number of established connections both in use and idle.", func(s pool.Stats) any { return s.Open })
	metric("gauge", "in_use_connections", "The number of connections currently in use.", func(s pool.Stats) any { return s.Active })
	metric("gauge", "idle_connections", "The number of idle connections.", func(s pool.Stats) any { return s.Idle })
	metric("gauge", "dialing_connections", "The number of dials (connect and TLS handshake) in progress.", func(s pool.Stats) any { return s.Dialing })
	metric("counter", "dials_total", "The total number of dials started.", func(s pool.Stats) any { return s.Dials })
	metric("counter", "dial_errors_total", "The total number of dials that failed.", func(s pool.Stats) any { return s.DialErrors })
	b.WriteString("# HELP connaudit_pool_closed_total The total number of connections closed, by the side that closed them and why.\n")
	b.WriteString("# TYPE connaudit_pool_closed_total counter\n")
	for _, h := range names {
		addr, port, _ := net.SplitHostPort(h)
		var reasons []string
		for r := range hosts[h].ClosedBy {
			reasons = append(reasons, string(r))
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			side := "client"
			switch r {
			case "connection-close", "http1.0-no-keep-alive", "server-closed-idle", "server-eof", "server-reset", "goaway", "protocol-error":
				side = "server"
			}
			fmt.Fprintf(&b, "connaudit_pool_closed_total{pool=%q,reason=%q,server_address=%q,server_port=%q,side=%q} %d\n",
				name, r, addr, port, side, hosts[h].ClosedBy[pool.CloseReason(r)])
		}
	}
	metric("counter", "wait_count_total", "The total number of requests not served at once by an idle connection: they waited for a dial or for a connection in use.", func(s pool.Stats) any { return s.WaitCount })
	histogram("wait_duration_seconds", "How long requests waited for a connection, dials included: each wait, a request the Transport sent again waiting once per attempt.", func(s pool.Stats) pool.Histogram { return s.Waits })
	metric("gauge", "waiting_requests", "The number of requests waiting for a connection.", func(s pool.Stats) any { return s.Waiting })
	histogram("connection_setup_duration_seconds", "How long connections took to set up, from the start of the dial to the TLS handshake done (DNS, connect, handshake).", func(s pool.Stats) pool.Histogram { return s.Setups })
	metric("counter", "requests_total", "The total number of requests.", func(s pool.Stats) any { return s.Requests })
	metric("counter", "reused_requests_total", "The total number of requests served by a connection that had served one before.", func(s pool.Stats) any { return s.ReusedRequests })
	metric("gauge", "in_flight_requests", "The number of requests not finished (their body not closed).", func(s pool.Stats) any { return s.InFlight })
	metric("gauge", "open_bodies", "The number of response bodies handed out and not closed.", func(s pool.Stats) any { return s.OpenBodies })
	metric("counter", "hidden_retries_total", "The total number of times the Transport sent a request again on another connection by itself, unseen by the caller.", func(s pool.Stats) any { return s.HiddenRetries })
	metric("counter", "hidden_retries_possibly_processed_total", "The hidden retries whose attempt before had been written to a connection that then failed without a response: the server may have processed the request twice.", func(s pool.Stats) any { return s.HiddenRetriesPossiblyProcessed })
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
			require.EqualValues(t, 1, s.HiddenRetries)
			require.EqualValues(t, 1, s.HiddenRetriesPossiblyProcessed, "the server read the request, then closed")
			require.Positive(t, s.Waits.Count)
			require.Len(t, p.HostStats(), 1)
			if hold {
				require.Equal(t, 1, s.Active)
				require.Equal(t, 1, s.OpenBodies)
			} else {
				require.EqualValues(t, 1, s.ClosedBy["server-closed-idle"])
			}
			require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exposition("api", p.MaxConnsPerHost(), p.HostStats()))))
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
				if h := m.GetHistogram(); h != nil {
					return h.GetSampleSum()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s{pool=%q %v}: no such series", family, name, labels)
		return 0
	}
	for name, p := range pools {
		s := p.Stats()
		hosts := p.HostStats()
		require.Len(t, hosts, 1)
		for h := range hosts {
			addr, port, err := net.SplitHostPort(h)
			require.NoError(t, err)
			require.EqualValues(t, s.Requests, value("connaudit_pool_requests_total", name, "server_address", addr, "server_port", port))
		}
		require.EqualValues(t, s.Open, value("connaudit_pool_open_connections", name))
		require.EqualValues(t, s.Active, value("connaudit_pool_in_use_connections", name))
		require.EqualValues(t, s.Idle, value("connaudit_pool_idle_connections", name))
		require.EqualValues(t, p.MaxConnsPerHost(), value("connaudit_pool_max_open_connections", name))
		require.EqualValues(t, s.MaxOpen, value("connaudit_pool_peak_open_connections", name))
		require.EqualValues(t, s.WaitCount, value("connaudit_pool_wait_count_total", name))
		require.InDelta(t, s.WaitDuration.Seconds(), value("connaudit_pool_wait_duration_seconds", name), 1e-9)
		require.InDelta(t, s.Setups.Sum.Seconds(), value("connaudit_pool_connection_setup_duration_seconds", name), 1e-9)
		require.EqualValues(t, s.HiddenRetries, value("connaudit_pool_hidden_retries_total", name))
		require.EqualValues(t, s.HiddenRetriesPossiblyProcessed, value("connaudit_pool_hidden_retries_possibly_processed_total", name))
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
