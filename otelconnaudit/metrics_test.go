package otelconnaudit_test

import (
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
)

func newFaultServer(t *testing.T, opts ...faultserver.Option) *faultserver.Server {
	t.Helper()
	s, err := faultserver.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/large", faultserver.LargeBody{Size: 1 << 20})
	s.Handle("/close", faultserver.ConnectionClose{})
	s.Handle("/retry", faultserver.CloseBeforeResponse{After: 1})
	return s
}

// TestNames checks the instruments' names and units against the
// conventions' own definitions (httpconv, semconv v1.43.0) and, for
// http.client.request.time_in_queue, which only .NET's conventions define,
// against the name and unit written there.
func TestNames(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t)
	p, _, closed := s.instrumented(t)
	do(t, bounded(t), p, srv.URL()+"/ok", -1)
	do(t, bounded(t), p, srv.URL()+"/close", -1)
	do(t, bounded(t), p, srv.URL()+"/ok", -1)
	closesSeen(t, closed, 1, nil)
	rm := s.collect(t)
	for _, want := range []struct{ name, unit string }{
		{httpconv.ClientOpenConnections{}.Name(), httpconv.ClientOpenConnections{}.Unit()},
		{httpconv.ClientConnectionDuration{}.Name(), httpconv.ClientConnectionDuration{}.Unit()},
		{httpconv.ClientActiveRequests{}.Name(), httpconv.ClientActiveRequests{}.Unit()},
		{httpconv.ClientRequestDuration{}.Name(), httpconv.ClientRequestDuration{}.Unit()},
		{"http.client.request.time_in_queue", "s"},
		{"connaudit.connection.closes", "{connection}"},
		{"connaudit.response.open_bodies", "{body}"},
	} {
		m := find(t, rm, want.name)
		require.Equal(t, want.unit, m.Unit, want.name)
	}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otelconnaudit.ScopeName, sm.Scope.Name)
	}
}

// TestMetricsEqualStats runs requests with faults through an instrumented
// pool — bodies closed early, a server's "Connection: close", a hidden
// retry, a body held open, the server closing the idle connections — and
// checks that what the SDK's reader collects equals the pool's own Stats.
func TestMetricsEqualStats(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t)
	p, col, closed := s.instrumented(t, pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1))
	ctx := bounded(t)

	// 20 requests: 5 close a 1 MiB body after 10 bytes (each closes its
	// connection), one is answered "Connection: close", one on a
	// kept-alive connection is read twice by the server (the Transport's
	// hidden retry: the second read closes the connection unanswered).
	for i := range 20 {
		switch {
		case i%4 == 3:
			do(t, ctx, p, srv.URL()+"/large", 10)
		case i == 9:
			do(t, ctx, p, srv.URL()+"/close", -1)
		case i == 12, i == 13:
			do(t, ctx, p, srv.URL()+"/retry", -1)
		default:
			do(t, ctx, p, srv.URL()+"/ok", -1)
		}
	}
	require.NoError(t, p.Quiesce(ctx))
	require.EqualValues(t, 3, srv.Counters("/retry").RequestsRead, "the server read the retried request twice")

	// A body held open: an active connection, a request in flight.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/ok", nil)
	require.NoError(t, err)
	held, err := p.Client().Do(req)
	require.NoError(t, err)
	st := p.Stats()
	require.Equal(t, 1, st.Active)
	require.Equal(t, 1, st.OpenBodies)
	seen := closesSeen(t, closed, st.Closed, nil)
	opens := s.opensSeen(t, st.Setups.Count, 0)
	requireEqualStats(t, s.collect(t), st, seen)
	_, err = io.Copy(io.Discard, held.Body)
	require.NoError(t, err)
	require.NoError(t, held.Body.Close())

	// The server closes the idle connection.
	require.NoError(t, p.Quiesce(ctx))
	srv.CloseClientConnections()
	require.NoError(t, p.WaitFor(ctx, func(s pool.Stats) bool { return s.Open == 0 && s.Dialing == 0 }))
	st = p.Stats()
	require.NoError(t, st.Check())
	// The close hook runs after the pool counted the close: wait for it
	// before collecting.
	seen = closesSeen(t, closed, st.Closed, seen)
	s.opensSeen(t, st.Setups.Count, opens)
	rm := s.collect(t)
	requireEqualStats(t, rm, st, seen)
	require.EqualValues(t, 1, st.ClosedBy["server-closed-idle"])
	require.EqualValues(t, 5, st.ClosedBy["early-body-close"])
	require.EqualValues(t, 1, st.ClosedBy["connection-close"])
	require.EqualValues(t, 1, st.ClosedBy["server-eof"], "the retried request's first connection")

	// Hidden retries: what the timelines say, and what the server saw
	// beyond what the caller sent.
	retries := 0
	for _, tl := range col.Timelines() {
		retries += tl.Retries
	}
	require.Equal(t, 1, retries)
	require.EqualValues(t, retries, sum(t, find(t, rm, "connaudit.request.hidden_retries"),
		attribute.String("http.request.method", "GET")))
}

// closesSeen waits until the OnConnClose hook has reported n closes in
// all, seen and more from closed, and returns them.
func closesSeen(t *testing.T, closed <-chan pool.Conn, n int64, seen []pool.Conn) []pool.Conn {
	t.Helper()
	ctx := bounded(t)
	out := seen
	for int64(len(out)) < n {
		select {
		case c := <-closed:
			out = append(out, c)
		case <-ctx.Done():
			t.Fatalf("%d of %d closes seen", len(out), n)
		}
	}
	return out
}

// requireEqualStats checks the collected metrics against the pool's
// Stats, st, and the closes its hook reported, cs.
func requireEqualStats(t *testing.T, rm metricdata.ResourceMetrics, st pool.Stats, cs []pool.Conn) {
	t.Helper()
	state := func(s string) attribute.KeyValue { return attribute.String("http.connection.state", s) }
	open := findSum(rm, "http.client.open_connections")
	require.EqualValues(t, st.Active, sum(t, open, state("active")), "active")
	require.EqualValues(t, st.Idle, sum(t, open, state("idle")), "idle")
	require.EqualValues(t, st.InFlight, sum(t, find(t, rm, "http.client.active_requests")), "in flight")
	require.EqualValues(t, st.OpenBodies, sum(t, find(t, rm, "connaudit.response.open_bodies")), "open bodies")

	closes := findSum(rm, "connaudit.connection.closes")
	require.Equal(t, st.Closed, sum(t, closes), "closed")
	require.Equal(t, st.ClosedByClient, sum(t, closes, attribute.String("connaudit.close.side", "client")))
	require.Equal(t, st.ClosedByServer, sum(t, closes, attribute.String("connaudit.close.side", "server")))
	for reason, n := range st.ClosedBy {
		require.Equal(t, n, sum(t, closes, attribute.String("connaudit.close.reason", string(reason))), reason)
	}

	// Requests that ended, and those whose response arrived: every one
	// has its duration, the one held open included.
	n, _ := hist(t, find(t, rm, "http.client.request.duration"))
	require.EqualValues(t, st.Requests, n, "requests")
	n, secs := hist(t, find(t, rm, "http.client.request.time_in_queue"))
	require.EqualValues(t, st.Waits.Count, n, "waits")
	require.InDelta(t, st.WaitDuration.Seconds(), secs, 1e-6, "wait duration")
	requireSameBuckets(t, find(t, rm, "http.client.request.time_in_queue"), st.Waits)
	n, secs = hist(t, find(t, rm, "connaudit.connection.setup.duration"))
	require.EqualValues(t, st.Setups.Count, n, "setups")
	require.InDelta(t, st.Setups.Sum.Seconds(), secs, 1e-6, "setup durations")
	requireSameBuckets(t, find(t, rm, "connaudit.connection.setup.duration"), st.Setups)

	if st.Closed > 0 {
		n, secs = hist(t, find(t, rm, "http.client.connection.duration"),
			attribute.String("network.protocol.version", "1.1"))
		require.EqualValues(t, st.Closed, n, "connection durations")
		var want float64
		for _, c := range cs {
			for _, h := range c.History {
				if h.State == "idle" || h.State == "active" {
					want += c.ClosedAt.Sub(h.At).Seconds()
					break
				}
			}
		}
		require.LessOrEqual(t, math.Abs(want-secs), 1e-6, "connection lifetimes")
	}
}

// requireSameBuckets checks that the points of m, added up, fall in the
// buckets of the pool's histogram h, at the pool's bounds.
func requireSameBuckets(t *testing.T, m metricdata.Metrics, h pool.Histogram) {
	t.Helper()
	d, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is %T", m.Name, m.Data)
	var bounds []float64
	for _, b := range pool.DurationBuckets() {
		bounds = append(bounds, b.Seconds())
	}
	counts := make([]int64, len(bounds)+1)
	for _, p := range d.DataPoints {
		require.Equal(t, bounds, p.Bounds, m.Name)
		for i, n := range p.BucketCounts {
			counts[i] += int64(n)
		}
	}
	require.Equal(t, h.Buckets, counts, m.Name)
}
