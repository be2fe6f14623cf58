// Command fleetview is a small service whose outgoing requests go through
// a connaudit pool exported for a fleet: the pool's numbers on /metrics
// (promconnaudit's collector, and the OpenTelemetry metrics through
// OpenTelemetry's Prometheus exporter), each request's stages as spans on
// standard output, under otelhttp's client span.
//
//	go run ./fleetview -addr 127.0.0.1:8080
//	curl 127.0.0.1:8080/work
//	curl 127.0.0.1:8080/metrics
//
// /work calls an upstream that the service itself serves on loopback.
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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve /work and /metrics on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := run(ctx, ln, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves on ln until ctx ends, writing spans to out.
func run(ctx context.Context, ln net.Listener, out io.Writer) error {
	upstream, err := serveUpstream()
	if err != nil {
		return err
	}
	defer upstream.Close()

	// The exporters: metrics to a Prometheus registry, spans to out.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	spans, err := stdouttrace.New(stdouttrace.WithWriter(out))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans))
	defer tp.Shutdown(context.Background())

	// The pool, exported both ways.
	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(mp), otelconnaudit.TracerProvider(tp))
	if err != nil {
		return err
	}
	p, err := pool.New(pool.WithObserver(o), pool.OnConnClose(o.ConnClosed))
	if err != nil {
		return err
	}
	defer p.Close()
	r, err := o.Register(p)
	if err != nil {
		return err
	}
	defer r.Unregister()
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
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, upstream.URL, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
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
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// upstream is the service /work calls, on loopback.
type upstream struct {
	URL string
	srv *http.Server
	ln  net.Listener
}

func serveUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{URL: "http://" + ln.Addr().String() + "/", ln: ln, srv: &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }),
		ReadHeaderTimeout: 10 * time.Second,
	}}
	go u.srv.Serve(ln)
	return u, nil
}

func (u *upstream) Close() { u.srv.Close() }
