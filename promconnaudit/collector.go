package promconnaudit

import (
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/prometheus/client_golang/prometheus"
)

// collector reads a pool's Stats at each collection.
type collector struct {
	p *pool.Pool

	maxOpen, peakOpen, open, inUse, idle *prometheus.Desc
	dialing                              *prometheus.Desc
	dials, dialErrors, closed            *prometheus.Desc
	waitCount, waitDuration, waiting     *prometheus.Desc
	requests, reused, inFlight, openBody *prometheus.Desc
}

// NewCollector returns a collector of p's statistics, its metrics labelled
// pool=name. Register one per pool; two pools registered under one name
// are refused by the registry as duplicates.
func NewCollector(p *pool.Pool, name string) (prometheus.Collector, error) {
	if p == nil {
		return nil, errors.New("promconnaudit: nil pool")
	}
	if name == "" || !utf8.ValidString(name) {
		return nil, errors.New("promconnaudit: the pool's name must be non-empty UTF-8")
	}
	labels := prometheus.Labels{"pool": name}
	desc := func(metric, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("connaudit", "pool", metric), help, vars, labels)
	}
	return &collector{
		p:            p,
		maxOpen:      desc("max_open_connections", "The cap on connections per host (MaxConnsPerHost); 0: no cap."),
		peakOpen:     desc("peak_open_connections", "The largest number of connections open at once."),
		open:         desc("open_connections", "The number of established connections both in use and idle."),
		inUse:        desc("in_use_connections", "The number of connections currently in use."),
		idle:         desc("idle_connections", "The number of idle connections."),
		dialing:      desc("dialing_connections", "The number of dials (connect and TLS handshake) in progress."),
		dials:        desc("dials_total", "The total number of dials started."),
		dialErrors:   desc("dial_errors_total", "The total number of dials that failed."),
		closed:       desc("closed_total", "The total number of connections closed, by the side that closed them and why.", "side", "reason"),
		waitCount:    desc("wait_count_total", "The total number of requests not served at once by an idle connection: they waited for a dial or for a connection in use."),
		waitDuration: desc("wait_duration_seconds_total", "The total time requests waited for a connection, dials included."),
		waiting:      desc("waiting_requests", "The number of requests waiting for a connection."),
		requests:     desc("requests_total", "The total number of requests."),
		reused:       desc("reused_requests_total", "The total number of requests served by a connection that had served one before."),
		inFlight:     desc("in_flight_requests", "The number of requests not finished (their body not closed)."),
		openBody:     desc("open_bodies", "The number of response bodies handed out and not closed."),
	}, nil
}

// Describe implements [prometheus.Collector].
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.maxOpen, c.peakOpen, c.open, c.inUse, c.idle, c.dialing, c.dials, c.dialErrors,
		c.closed, c.waitCount, c.waitDuration, c.waiting, c.requests, c.reused, c.inFlight, c.openBody} {
		ch <- d
	}
}

// Collect implements [prometheus.Collector]: one read of the pool's
// Stats.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.maxOpen, c.p.MaxConnsPerHost())
	gauge(c.peakOpen, s.MaxOpen)
	gauge(c.open, s.Open)
	gauge(c.inUse, s.Active)
	gauge(c.idle, s.Idle)
	gauge(c.dialing, s.Dialing)
	counter(c.dials, float64(s.Dials))
	counter(c.dialErrors, float64(s.DialErrors))
	reasons := make([]pool.CloseReason, 0, len(s.ClosedBy))
	for r := range s.ClosedBy {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		counter(c.closed, float64(s.ClosedBy[r]), string(vocab.SideOf(r)), string(r))
	}
	counter(c.waitCount, float64(s.WaitCount))
	counter(c.waitDuration, s.WaitDuration.Seconds())
	gauge(c.waiting, s.Waiting)
	counter(c.requests, float64(s.Requests))
	counter(c.reused, float64(s.ReusedRequests))
	gauge(c.inFlight, s.InFlight)
	gauge(c.openBody, s.OpenBodies)
}
