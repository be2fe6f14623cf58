package otelconnaudit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A pool exporting its metrics and its requests' stages. A service passes
// its own providers (an OTLP or Prometheus exporter behind them); here a
// manual reader and an in-memory exporter show what comes out.
func ExampleNewObserver() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer mp.Shutdown(context.Background())
	defer tp.Shutdown(context.Background())

	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(mp), otelconnaudit.TracerProvider(tp))
	if err != nil {
		panic(err)
	}
	p, err := pool.New(pool.WithObserver(o), pool.OnConnClose(o.ConnClosed), pool.OnConnOpen(o.ConnOpened))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	reg, err := o.Register(p)
	if err != nil {
		panic(err)
	}
	defer reg.Unregister()

	// A request under the caller's span.
	ctx, caller := tp.Tracer("example").Start(context.Background(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := p.Client().Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	caller.End()

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	var metrics, stages []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			metrics = append(metrics, m.Name+" ("+m.Unit+")")
		}
	}
	for _, s := range spans.GetSpans() {
		name, _, _ := strings.Cut(s.Name, " 127.0.0.1")
		stages = append(stages, name)
	}
	slices.Sort(metrics)
	fmt.Println(strings.Join(metrics, "\n"))
	fmt.Println(strings.Join(stages, "\n"))
	// Output:
	// connaudit.connection.setup.duration (s)
	// connaudit.response.open_bodies ({body})
	// http.client.active_requests ({request})
	// http.client.open_connections ({connection})
	// http.client.request.duration (s)
	// http.client.request.time_in_queue (s)
	// HTTP wait_for_connection
	// socket connect
	// HTTP write_request
	// HTTP wait_for_response
	// HTTP read_response_body
	// caller
}
