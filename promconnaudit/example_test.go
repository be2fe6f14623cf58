package promconnaudit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// A pool's statistics on a registry, as a scrape would show them: a series
// per host. A service registers on prometheus.DefaultRegisterer and serves
// promhttp.Handler() on /metrics.
func ExampleNewCollector() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p, err := pool.New()
	if err != nil {
		panic(err)
	}
	defer p.Close()
	c, err := promconnaudit.NewCollector(p, "payments")
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	resp, err := p.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := p.Quiesce(resp.Request.Context()); err != nil {
		panic(err)
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, f := range families {
		expfmt.MetricFamilyToText(&b, f)
	}
	u, _ := url.Parse(srv.URL)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "connaudit_pool_open_connections") || strings.HasPrefix(line, "connaudit_pool_requests") ||
			strings.HasPrefix(line, "connaudit_pool_wait_duration_seconds_count") {
			fmt.Println(strings.Replace(line, u.Port(), "PORT", 1))
		}
	}
	// Output:
	// connaudit_pool_open_connections{pool="payments",server_address="127.0.0.1",server_port="PORT"} 1
	// connaudit_pool_requests_total{pool="payments",server_address="127.0.0.1",server_port="PORT"} 1
	// connaudit_pool_wait_duration_seconds_count{pool="payments",server_address="127.0.0.1",server_port="PORT"} 1
}
