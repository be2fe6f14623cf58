package promconnaudit_test

import (
	"fmt"
	"strings"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// A pool's statistics on a registry, as a scrape would show them. A
// service registers on prometheus.DefaultRegisterer and serves
// promhttp.Handler() on /metrics.
func ExampleNewCollector() {
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

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, f := range families {
		expfmt.MetricFamilyToText(&b, f)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "connaudit_pool_open") || strings.HasPrefix(line, "connaudit_pool_requests") {
			fmt.Println(line)
		}
	}
	// Output:
	// connaudit_pool_open_bodies{pool="payments"} 0
	// connaudit_pool_open_connections{pool="payments"} 0
	// connaudit_pool_requests_total{pool="payments"} 0
}
