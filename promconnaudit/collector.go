package promconnaudit

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxHosts is how many hosts get series of their own unless
// [MaxHosts] says otherwise. A service calls a bounded set of upstreams,
// rarely more than a few dozen; each host costs about 70 series (two
// histograms of 21 series each, the closes by reason, the gauges and
// counters), so 32 hosts stay near 2,000 series per pool.
const DefaultMaxHosts = 32

// OtherHost is the server_address of the series that add up the hosts past
// the cap ([MaxHosts]), as the OpenTelemetry conventions name every method
// past theirs "_OTHER". Those series have no server_port.
const OtherHost = "_OTHER"

// Option configures a collector. Options are applied in order; an option
// whose value makes no sense is an error from [NewCollector].
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	maxHosts int
}

// MaxHosts sets how many hosts get series of their own (default
// [DefaultMaxHosts]): the first n the collector sees, in the order of the
// collections that first see them (and, within one, of their names), keep
// theirs for the collector's life; the numbers of every later host add up
// in the series of [OtherHost]. A host never moves from one to the other,
// so that every counter only grows. n must be at least 1.
func MaxHosts(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("promconnaudit: MaxHosts %d is less than 1", n)
		}
		c.maxHosts = n
		return nil
	})
}

// collector reads a pool's HostStats at each collection.
type collector struct {
	p       *pool.Pool
	max     int
	buckets []float64 // pool.DurationBuckets in seconds

	maxOpen, peakOpen, open, inUse, idle *prometheus.Desc
	dialing                              *prometheus.Desc
	dials, dialErrors, closed            *prometheus.Desc
	waitCount, waits, waiting, setups    *prometheus.Desc
	requests, reused, inFlight, openBody *prometheus.Desc
	retries, retriesPossibly             *prometheus.Desc

	mu       sync.Mutex
	admitted map[string]bool // the hosts with series of their own
}

// hostLabels are the variable labels of every metric: the host as the
// OpenTelemetry conventions name its parts.
var hostLabels = []string{"server_address", "server_port"}

// NewCollector returns a collector of p's statistics, its metrics labelled
// pool=name and, per host, server_address and server_port. Register one
// per pool; two pools registered under one name are refused by the
// registry as duplicates.
func NewCollector(p *pool.Pool, name string, opts ...Option) (prometheus.Collector, error) {
	if p == nil {
		return nil, errors.New("promconnaudit: nil pool")
	}
	if name == "" || !utf8.ValidString(name) {
		return nil, errors.New("promconnaudit: the pool's name must be non-empty UTF-8")
	}
	cfg := config{maxHosts: DefaultMaxHosts}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("promconnaudit: nil option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	labels := prometheus.Labels{"pool": name}
	desc := func(metric, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("connaudit", "pool", metric), help, append(slices.Clone(hostLabels), vars...), labels)
	}
	var buckets []float64
	for _, d := range pool.DurationBuckets() {
		buckets = append(buckets, d.Seconds())
	}
	return &collector{
		p:               p,
		max:             cfg.maxHosts,
		buckets:         buckets,
		admitted:        map[string]bool{},
		maxOpen:         desc("max_open_connections", "The cap on connections to the host (MaxConnsPerHost); 0: no cap."),
		peakOpen:        desc("peak_open_connections", "The largest number of connections open to the host at once."),
		open:            desc("open_connections", "The number of established connections both in use and idle."),
		inUse:           desc("in_use_connections", "The number of connections currently in use."),
		idle:            desc("idle_connections", "The number of idle connections."),
		dialing:         desc("dialing_connections", "The number of dials (connect and TLS handshake) in progress."),
		dials:           desc("dials_total", "The total number of dials started."),
		dialErrors:      desc("dial_errors_total", "The total number of dials that failed."),
		closed:          desc("closed_total", "The total number of connections closed, by the side that closed them and why.", "side", "reason"),
		waitCount:       desc("wait_count_total", "The total number of requests not served at once by an idle connection: they waited for a dial or for a connection in use."),
		waits:           desc("wait_duration_seconds", "How long requests waited for a connection, dials included: each wait, a request the Transport sent again waiting once per attempt."),
		waiting:         desc("waiting_requests", "The number of requests waiting for a connection."),
		setups:          desc("connection_setup_duration_seconds", "How long connections took to set up, from the start of the dial to the TLS handshake done (DNS, connect, handshake)."),
		requests:        desc("requests_total", "The total number of requests."),
		reused:          desc("reused_requests_total", "The total number of requests served by a connection that had served one before."),
		inFlight:        desc("in_flight_requests", "The number of requests not finished (their body not closed)."),
		openBody:        desc("open_bodies", "The number of response bodies handed out and not closed."),
		retries:         desc("hidden_retries_total", "The total number of times the Transport sent a request again on another connection by itself, unseen by the caller."),
		retriesPossibly: desc("hidden_retries_possibly_processed_total", "The hidden retries whose attempt before had been written to a connection that then failed without a response: the server may have processed the request twice."),
	}, nil
}

// Describe implements [prometheus.Collector].
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.maxOpen, c.peakOpen, c.open, c.inUse, c.idle, c.dialing, c.dials, c.dialErrors,
		c.closed, c.waitCount, c.waits, c.waiting, c.setups, c.requests, c.reused, c.inFlight, c.openBody, c.retries, c.retriesPossibly} {
		ch <- d
	}
}

// Collect implements [prometheus.Collector]: one read of the pool's
// HostStats, a series per host admitted, the others added up.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	hosts := c.p.HostStats()
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	slices.Sort(names)
	var (
		other    *pool.Stats
		admitted = make([]string, 0, len(names))
	)
	c.mu.Lock()
	for _, h := range names {
		if !c.admitted[h] && len(c.admitted) < c.max {
			c.admitted[h] = true
		}
		if c.admitted[h] {
			admitted = append(admitted, h)
			continue
		}
		if other == nil {
			other = new(pool.Stats)
		}
		other.Add(hosts[h])
	}
	c.mu.Unlock()
	for _, h := range admitted {
		addr, port, err := net.SplitHostPort(h)
		if err != nil {
			addr, port = h, ""
		}
		c.collect(ch, hosts[h], addr, port)
	}
	if other != nil {
		c.collect(ch, *other, OtherHost, "")
	}
}

// collect sends the metrics of one host's numbers s.
func (c *collector) collect(ch chan<- prometheus.Metric, s pool.Stats, host ...string) {
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), host...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(slices.Clone(host), labels...)...)
	}
	gauge(c.maxOpen, c.p.MaxConnsPerHost())
	gauge(c.peakOpen, s.MaxOpen)
	gauge(c.open, s.Open)
	gauge(c.inUse, s.Active)
	gauge(c.idle, s.Idle)
	gauge(c.dialing, s.Dialing)
	counter(c.dials, s.Dials)
	counter(c.dialErrors, s.DialErrors)
	reasons := make([]pool.CloseReason, 0, len(s.ClosedBy))
	for r := range s.ClosedBy {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		counter(c.closed, s.ClosedBy[r], string(vocab.SideOf(r)), string(r))
	}
	counter(c.waitCount, s.WaitCount)
	c.histogram(ch, c.waits, s.Waits, host)
	gauge(c.waiting, s.Waiting)
	c.histogram(ch, c.setups, s.Setups, host)
	counter(c.requests, s.Requests)
	counter(c.reused, s.ReusedRequests)
	gauge(c.inFlight, s.InFlight)
	gauge(c.openBody, s.OpenBodies)
	counter(c.retries, s.HiddenRetries)
	counter(c.retriesPossibly, s.HiddenRetriesPossiblyProcessed)
}

// histogram sends h as a histogram in seconds, every bucket present, at 0
// if empty.
func (c *collector) histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h pool.Histogram, host []string) {
	cum := make(map[float64]uint64, len(c.buckets))
	var n uint64
	for i, le := range c.buckets {
		if i < len(h.Buckets) {
			n += uint64(h.Buckets[i])
		}
		cum[le] = n
	}
	ch <- prometheus.MustNewConstHistogram(d, uint64(h.Count), h.Sum.Seconds(), cum, host...)
}
