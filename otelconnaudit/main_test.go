package otelconnaudit_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitBound bounds every wait of a test: only hit when the awaited thing
// never happens.
const waitBound = 10 * time.Second

func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// sdks are the real SDKs a test exports through: a meter provider read by
// a manual reader, a tracer provider exporting synchronously to memory.
type sdks struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	extra  httptrace.Observer
	// opened receives each connection the OnConnOpen hook of an
	// instrumented pool reported.
	opened chan pool.Conn
}

func newSDKs(t *testing.T) *sdks {
	t.Helper()
	s := &sdks{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter(), opened: make(chan pool.Conn, 1024)}
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(s.spans), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() {
		s.mp.Shutdown(context.Background())
		s.tp.Shutdown(context.Background())
	})
	return s
}

// instrumented returns a pool observed by a new Observer exporting to s,
// and by a Collector for the timelines (and by s.extra, if set), with
// opts.
func (s *sdks) instrumented(t *testing.T, opts ...pool.Option) (*pool.Pool, *httptrace.Collector, <-chan pool.Conn) {
	t.Helper()
	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(s.mp), otelconnaudit.TracerProvider(s.tp))
	require.NoError(t, err)
	col := &httptrace.Collector{}
	closed := make(chan pool.Conn, 1024)
	p, err := pool.New(append([]pool.Option{
		pool.WithObserver(httptrace.Multi(o, col, s.extra)),
		pool.OnConnClose(func(c pool.Conn) { o.ConnClosed(c); closed <- c }),
		pool.OnConnOpen(func(c pool.Conn) { o.ConnOpened(c); s.opened <- c }),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	reg, err := o.Register(p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	return p, col, closed
}

// opensSeen waits until the OnConnOpen hook has reported n connections
// in all, of which seen already: the hook runs after the pool counted the
// connection.
func (s *sdks) opensSeen(t *testing.T, n int64, seen int64) int64 {
	t.Helper()
	ctx := bounded(t)
	for seen < n {
		select {
		case <-s.opened:
			seen++
		case <-ctx.Done():
			t.Fatalf("%d of %d opens seen", seen, n)
		}
	}
	return seen
}

func (s *sdks) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(bounded(t), &rm))
	return rm
}

// find returns the metric called name, failing the test if absent.
func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %q", name)
	return metricdata.Metrics{}
}

// has reports whether set has every attribute of want.
func has(set attribute.Set, want ...attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// findSum returns the sum metric called name, or an empty one: the SDK
// leaves out an observable instrument that observed nothing.
func findSum(rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	return metricdata.Metrics{Name: name, Data: metricdata.Sum[int64]{}}
}

// sum adds the points of a sum metric whose attributes include want.
func sum(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) int64 {
	t.Helper()
	d, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is %T", m.Name, m.Data)
	var n int64
	for _, p := range d.DataPoints {
		if has(p.Attributes, want...) {
			n += p.Value
		}
	}
	return n
}

// hist adds the counts and sums of a histogram's points whose attributes
// include want.
func hist(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	d, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is %T", m.Name, m.Data)
	var (
		n uint64
		s float64
	)
	for _, p := range d.DataPoints {
		if has(p.Attributes, want...) {
			n += p.Count
			s += p.Sum
		}
	}
	return n, s
}

// do sends a GET to url through p, under ctx, reads n bytes of the body
// (all of it if n < 0) and closes it.
func do(t *testing.T, ctx context.Context, p *pool.Pool, url string, n int64) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	if n < 0 {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		_, err = io.CopyN(io.Discard, resp.Body, n)
	}
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// parent starts a sampled span of the test's own to put requests under.
func (s *sdks) parent(t *testing.T) (context.Context, trace.Span) {
	t.Helper()
	return s.tp.Tracer("test").Start(bounded(t), "caller")
}
