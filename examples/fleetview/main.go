// Command fleetview is a small service whose outgoing requests go through
// a connaudit pool exported for a fleet: the pool's numbers on /metrics,
// per host, by promconnaudit's collector; request durations and connection
// lifetimes, which only the OpenTelemetry side has, through OpenTelemetry's
// Prometheus exporter (service.name "fleetview"); the pool's state on
// /debug/connpool; with -spans, each request's stages as spans on standard
// output, under otelhttp's client span.
//
//	go run ./fleetview -addr 127.0.0.1:8080 -load 100
//	curl 127.0.0.1:8080/metrics
//	curl '127.0.0.1:8080/debug/connpool?format=text'
//
// /work calls an upstream that the service itself serves on loopback; with
// -load the service sends itself that many requests a second, by
// -concurrency at once, to two such upstreams (two hosts), so that
// dashboards have something to show; -faults adds a hidden retry the
// server may have processed in 1 request of 50, and a response body left
// open in 1 of 200 (up to 100). prometheus.yml beside this file scrapes it
// with the rules of promconnaudit/monitoring.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// config is what the flags set.
type config struct {
	load        float64 // requests a second the service sends itself; 0: none
	concurrency int     // at most that many of them at once
	faults      bool    // some of them hidden retries and bodies left open
	maxIdle     int     // MaxIdleConnsPerHost; 0: net/http's default, 2
	spans       bool    // spans to the output

	onPool func(*pool.Pool) // if set, given the pool once built (tests)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve /work, /metrics and /debug/connpool on")
	var cfg config
	flag.Float64Var(&cfg.load, "load", 0, "requests a second the service sends itself, to two upstreams on loopback; 0: none")
	flag.IntVar(&cfg.concurrency, "concurrency", 8, "how many of the -load requests at most are in flight at once")
	flag.BoolVar(&cfg.faults, "faults", false, "with -load: 1 request in 50 is dropped by the upstream after it read it (a hidden retry), 1 in 200 leaves its body open (up to 100)")
	flag.IntVar(&cfg.maxIdle, "max-idle-per-host", 0, "the pool's MaxIdleConnsPerHost; 0: net/http's default, 2, which churns connections past 2 requests at once")
	flag.BoolVar(&cfg.spans, "spans", false, "write each request's stages as spans to standard output")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "fleetview:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "fleetview: serving on http://%s (/work, /metrics, /debug/connpool)\n", ln.Addr())
	if err := run(ctx, ln, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.load < 0 || c.load > 100000:
		return fmt.Errorf("-load %v: want 0 to 100000 requests a second", c.load)
	case c.concurrency < 1 || c.concurrency > 10000:
		return fmt.Errorf("-concurrency %d: want 1 to 10000", c.concurrency)
	case c.maxIdle < 0:
		return fmt.Errorf("-max-idle-per-host %d is negative", c.maxIdle)
	}
	return nil
}

// run serves on ln until ctx ends, writing spans to out if cfg says so.
func run(ctx context.Context, ln net.Listener, out io.Writer, cfg config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	var ups []*upstream
	defer func() {
		for _, u := range ups {
			u.Close()
		}
	}()
	for range 2 {
		u, err := serveUpstream()
		if err != nil {
			return err
		}
		ups = append(ups, u)
	}

	// The exporters: metrics to a Prometheus registry, spans to out.
	res := resource.NewSchemaless(semconv.ServiceName("fleetview"))
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	// One exporter's names per concept: promconnaudit exports the pool's
	// numbers (connections, closes, open bodies, waits, setups, hidden
	// retries), so the OpenTelemetry side keeps what only it has, request
	// durations and connection lifetimes. The Observer is not registered
	// with the pool (no open_connections, active_requests, open_bodies,
	// closes) and its own waits and retries are dropped.
	drop := func(name string) sdkmetric.View {
		return sdkmetric.NewView(sdkmetric.Instrument{Name: name}, sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res),
		sdkmetric.WithView(drop("http.client.request.time_in_queue"), drop("connaudit.request.hidden_retries")))
	defer mp.Shutdown(context.Background())
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.spans {
		spans, err := stdouttrace.New(stdouttrace.WithWriter(out))
		if err != nil {
			return err
		}
		topts = append(topts, sdktrace.WithBatcher(spans))
	} else {
		topts = append(topts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	defer tp.Shutdown(context.Background())

	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(mp), otelconnaudit.TracerProvider(tp))
	if err != nil {
		return err
	}
	popts := []pool.Option{pool.WithObserver(o), pool.OnConnClose(o.ConnClosed)}
	if cfg.maxIdle > 0 {
		popts = append(popts, pool.MaxIdleConnsPerHost(cfg.maxIdle))
	}
	p, err := pool.New(popts...)
	if err != nil {
		return err
	}
	defer p.Close()
	if cfg.onPool != nil {
		cfg.onPool(p)
	}
	c, err := promconnaudit.NewCollector(p, "upstream")
	if err != nil {
		return err
	}
	if err := reg.Register(c); err != nil {
		return err
	}
	// otelhttp makes the client span the stages go under; its own
	// metrics are off, the pool's cover them.
	client := &http.Client{Transport: otelhttp.NewTransport(p.RoundTripper(),
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /debug/connpool", p.Handler())
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
		resp, err := call(r.Context(), client, ups[0].URL)
		if err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var load sync.WaitGroup
	held := &heldBodies{}
	defer held.closeAll()
	if cfg.load > 0 {
		loadCtx, stopLoad := context.WithCancel(ctx)
		defer stopLoad()
		load.Go(func() { drive(loadCtx, cfg, client, ups, held) })
	}
	select {
	case err := <-done:
		load.Wait()
		return err
	case <-ctx.Done():
	}
	load.Wait()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// call sends a GET to url through client.
func call(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}

// drive sends cfg.load requests a second through client until ctx ends,
// by cfg.concurrency workers, to the upstreams in turn: in bursts every
// tenth of a second, as requests come to a service, so that up to
// cfg.concurrency are in flight at once. A request that finds every
// worker busy is skipped: the load never queues up.
func drive(ctx context.Context, cfg config, client *http.Client, ups []*upstream, held *heldBodies) {
	jobs := make(chan uint64)
	var workers sync.WaitGroup
	for range cfg.concurrency {
		workers.Go(func() {
			for n := range jobs {
				send(ctx, cfg, client, ups, held, n)
			}
		})
	}
	defer workers.Wait()
	defer close(jobs)
	const every = 100 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	var (
		n    uint64
		owed float64 // requests due and not yet sent
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for owed += cfg.load * every.Seconds(); owed >= 1; owed-- {
			select {
			case jobs <- n:
				n++
			default:
			}
		}
	}
}

// send sends the load's request n, read to the end and closed, except
// for the faults.
func send(ctx context.Context, cfg config, client *http.Client, ups []*upstream, held *heldBodies, n uint64) {
	url := ups[n%uint64(len(ups))].URL
	if cfg.faults && n%50 == 49 {
		url += "drop"
	}
	resp, err := call(ctx, client, url)
	if err != nil {
		return // a drop on a new connection fails: nothing to send again on
	}
	if cfg.faults && n%200 == 199 && held.hold(resp) {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// heldBodies are the response bodies the load leaves open, up to 100,
// closed when the service stops.
type heldBodies struct {
	mu     sync.Mutex
	bodies []io.Closer
}

func (h *heldBodies) hold(resp *http.Response) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bodies) >= 100 {
		return false
	}
	h.bodies = append(h.bodies, resp.Body)
	return true
}

func (h *heldBodies) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bodies {
		b.Close()
	}
	h.bodies = nil
}

// upstream is a service the pool calls, on loopback: "ok" on every path
// but /drop, for which, every other time it comes on a connection that
// served a request before, it reads the request and drops the connection
// unanswered. The Transport then sends the request again on another
// connection (it does so only after a reused one failed), where it is
// answered.
type upstream struct {
	URL   string
	srv   *http.Server
	drops atomic.Int64
}

func serveUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{URL: "http://" + ln.Addr().String() + "/"}
	u.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, _ := r.Context().Value(connKey{}).(*connCount)
			reused := c != nil && c.n.Add(1) > 1
			if r.URL.Path == "/drop" && reused && u.drops.Add(1)%2 == 1 {
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						conn.Close()
						return
					}
				}
			}
			io.WriteString(w, "ok\n")
		}),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, &connCount{})
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go u.srv.Serve(ln)
	return u, nil
}

// connKey keys a connection's connCount in its requests' contexts.
type connKey struct{}

// connCount counts the requests a connection carried.
type connCount struct{ n atomic.Int32 }

func (u *upstream) Close() { u.srv.Close() }
