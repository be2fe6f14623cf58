package promconnaudit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A proxy embedded in a program: its upstream pool's numbers are scraped
// as any pool's, each request the client sent through the proxy counted
// once on the proxy's side.
func TestProxyUpstreamPool(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(up.Close)
	p, err := proxy.New(up.URL)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	c, err := promconnaudit.NewCollector(p.UpstreamPool(), "proxy-upstream")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for range 4 {
		req, err := http.NewRequestWithContext(bounded(t), "GET", p.URL()+"/x", nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	require.NoError(t, p.UpstreamPool().Quiesce(bounded(t)))
	families, err := reg.Gather()
	require.NoError(t, err)
	var requests float64
	for _, f := range families {
		if f.GetName() == "connaudit_pool_requests_total" {
			for _, m := range f.GetMetric() {
				requests += m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, 4.0, requests)
}
