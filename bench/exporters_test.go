package bench

import (
	"context"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkExporters measures what exporting costs per request on the
// workload of BenchmarkSequential (GET, body read to EOF and closed, one
// kept-alive connection), against the real OpenTelemetry SDK: a meter
// provider with a manual reader, a tracer provider sampling every span
// (with no exporter, so that the figures are the instrumentation's, not an
// exporter's). Compare allocs/op:
//
//   - pool: a [pool.New] pool, nothing exported (the baseline of the next
//     three).
//   - pool+metrics: the same with an [otelconnaudit.Observer] exporting
//     metrics (registered, its connection hook set).
//   - pool+metrics+spans: also exporting spans, each request under a
//     sampled caller's span (the stages' spans made on every request).
//   - plain: the bare transport (the baseline of the next two).
//   - otelhttp: otelhttp.NewTransport around it, metrics to the same kind
//     of meter provider, spans to a no-op tracer.
//   - otelhttp+spans: the same, its client span sampled into the SDK.
//
// Read with
//
//	go test -run '^$' -bench Exporters -benchmem -count 10 . | benchstat -col /client -
func BenchmarkExporters(b *testing.B) {
	target, stop, err := Target()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, name := range []string{"pool", "pool+metrics", "pool+metrics+spans", "plain", "otelhttp", "otelhttp+spans"} {
		b.Run("client="+name, func(b *testing.B) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
			defer mp.Shutdown(context.Background())
			defer tp.Shutdown(context.Background())
			ctx := context.Background()
			var hc *http.Client
			switch name {
			case "pool", "pool+metrics", "pool+metrics+spans":
				var popts []pool.Option
				var o *otelconnaudit.Observer
				if name != "pool" {
					oopts := []otelconnaudit.Option{otelconnaudit.MeterProvider(mp)}
					if name == "pool+metrics+spans" {
						oopts = append(oopts, otelconnaudit.TracerProvider(tp))
						c, caller := tp.Tracer("bench").Start(ctx, "caller")
						defer caller.End()
						ctx = c
					}
					if o, err = otelconnaudit.NewObserver(oopts...); err != nil {
						b.Fatal(err)
					}
					popts = append(popts, pool.WithObserver(o), pool.OnConnClose(o.ConnClosed), pool.OnConnOpen(o.ConnOpened))
				}
				p, err := pool.New(popts...)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				if o != nil {
					reg, err := o.Register(p)
					if err != nil {
						b.Fatal(err)
					}
					defer reg.Unregister()
				}
				hc = p.Client()
			default:
				base := Base(1)
				defer base.CloseIdleConnections()
				var rt http.RoundTripper = base
				switch name {
				case "otelhttp":
					rt = otelhttp.NewTransport(base, otelhttp.WithMeterProvider(mp), otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()))
				case "otelhttp+spans":
					rt = otelhttp.NewTransport(base, otelhttp.WithMeterProvider(mp), otelhttp.WithTracerProvider(tp))
				}
				hc = &http.Client{Transport: rt}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			if err != nil {
				b.Fatal(err)
			}
			for range 4 { // dial outside the measurement
				if err := get(hc, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu := benchpair.ProcessCPU()
			b.ResetTimer()
			for b.Loop() {
				if err := get(hc, req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(benchpair.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
			// The exporting clients recorded every request.
			if name != "pool" && name != "plain" {
				if n := durations(b, reader); n < uint64(b.N) {
					b.Fatalf("%d request durations recorded for %d requests", n, b.N)
				}
			}
		})
	}
}

// durations returns the number of http.client.request.duration
// measurements reader collects.
func durations(b *testing.B, reader *sdkmetric.ManualReader) uint64 {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		b.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "http.client.request.duration" {
				for _, p := range h.DataPoints {
					n += p.Count
				}
			}
		}
	}
	return n
}
