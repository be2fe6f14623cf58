package promconnaudit_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// series returns the value of each series of family in reg, by its
// server_address:server_port.
func series(t *testing.T, reg *prometheus.Registry, family string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			var addr, port string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "server_address":
					addr = l.GetValue()
				case "server_port":
					port = l.GetValue()
				}
			}
			out[addr+":"+port] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetGauge().GetValue()
}

// okServers starts n loopback servers and returns their URLs in the order
// of their host:port, as the collector sorts hosts.
func okServers(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	slices.Sort(urls)
	return urls
}

func getN(t *testing.T, p *pool.Pool, url string, n int) {
	t.Helper()
	for range n {
		req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
}

func hostOf(url string) string { return strings.TrimPrefix(url, "http://") }

// TestHostCap: past MaxHosts, hosts add up under _OTHER, whose peak is the
// largest of theirs; a host admitted keeps its series, a later one goes to
// _OTHER, and the series add up to the pool's totals at every collection.
func TestHostCap(t *testing.T) {
	urls := okServers(t, 5)
	p, err := pool.New(pool.MaxConnsPerHost(2))
	require.NoError(t, err)
	defer p.Close()
	c, err := promconnaudit.NewCollector(p, "api", promconnaudit.MaxHosts(2))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	// The first host sorts first of all, and is used last.
	first, urls := urls[0], urls[1:]
	for i, u := range urls {
		getN(t, p, u, i+1)
	}
	require.NoError(t, p.Quiesce(bounded(t)))
	other := promconnaudit.OtherHost + ":"
	want := map[string]float64{hostOf(urls[0]): 1, hostOf(urls[1]): 2, other: 3 + 4}
	require.Equal(t, want, series(t, reg, "connaudit_pool_requests_total"))
	require.Equal(t, map[string]float64{hostOf(urls[0]): 1, hostOf(urls[1]): 1, other: 1},
		series(t, reg, "connaudit_pool_peak_open_connections"), "the largest, not the sum")
	require.Equal(t, map[string]float64{hostOf(urls[0]): 2, hostOf(urls[1]): 2, other: 2},
		series(t, reg, "connaudit_pool_max_open_connections"), "the cap per host")
	require.Equal(t, map[string]float64{hostOf(urls[0]): 1, hostOf(urls[1]): 1, other: 2},
		series(t, reg, "connaudit_pool_connection_setup_duration_seconds"))

	// A fifth host, though it sorts first, adds to _OTHER.
	getN(t, p, first, 5)
	require.NoError(t, p.Quiesce(bounded(t)))
	want[other] += 5
	got := series(t, reg, "connaudit_pool_requests_total")
	require.Equal(t, want, got)
	var sum float64
	for _, v := range got {
		sum += v
	}
	require.EqualValues(t, p.Stats().Requests, sum)
	require.Equal(t, map[string]float64{hostOf(urls[0]): 1, hostOf(urls[1]): 1, other: 3},
		series(t, reg, "connaudit_pool_dials_total"), "each host dialed once")
}

// TestSeriesReadZero: once a host's last connection closes, its gauges
// read 0, present, and its histograms keep every bucket.
func TestSeriesReadZero(t *testing.T) {
	urls := okServers(t, 1)
	p, err := pool.New()
	require.NoError(t, err)
	defer p.Close()
	c, err := promconnaudit.NewCollector(p, "api")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	getN(t, p, urls[0], 1)
	h := hostOf(urls[0])
	require.Equal(t, map[string]float64{h: 1}, series(t, reg, "connaudit_pool_idle_connections"))
	p.CloseIdleConnections()
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Open == 0 }))
	for _, f := range []string{"connaudit_pool_open_connections", "connaudit_pool_idle_connections", "connaudit_pool_in_use_connections",
		"connaudit_pool_in_flight_requests", "connaudit_pool_open_bodies", "connaudit_pool_hidden_retries_total"} {
		require.Equal(t, map[string]float64{h: 0}, series(t, reg, f), f)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "connaudit_pool_wait_duration_seconds" {
			require.Len(t, f.GetMetric()[0].GetHistogram().GetBucket(), len(pool.DurationBuckets()))
		}
	}
	addr, port, err := net.SplitHostPort(h)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", addr)
	require.NotEmpty(t, port)
}

func TestMaxHostsRejects(t *testing.T) {
	p, err := pool.New()
	require.NoError(t, err)
	defer p.Close()
	_, err = promconnaudit.NewCollector(p, "api", promconnaudit.MaxHosts(0))
	require.ErrorContains(t, err, "MaxHosts 0")
	_, err = promconnaudit.NewCollector(p, "api", nil)
	require.ErrorContains(t, err, "nil option")
}

// TestHiddenRetriesSeries: a stream the server refused, which the
// Transport sent again, is a hidden retry the server did not process.
func TestHiddenRetriesSeries(t *testing.T) {
	s, err := faultserver.New(faultserver.RawHTTP2())
	require.NoError(t, err)
	defer s.Close()
	s.Handle("/refused", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{},
	}})
	p, err := pool.New(pool.TLSClientConfig(s.ClientTLSConfig()))
	require.NoError(t, err)
	defer p.Close()
	c, err := promconnaudit.NewCollector(p, "api")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	getN(t, p, s.URL()+"/refused", 1)
	require.NoError(t, p.Quiesce(bounded(t)))
	h := strings.TrimPrefix(s.URL(), "https://")
	require.Equal(t, map[string]float64{h: 1}, series(t, reg, "connaudit_pool_hidden_retries_total"))
	require.Equal(t, map[string]float64{h: 0}, series(t, reg, "connaudit_pool_hidden_retries_possibly_processed_total"))
}
