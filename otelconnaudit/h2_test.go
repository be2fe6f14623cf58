package otelconnaudit_test

import (
	"sync"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// TestWaitsHTTP2 checks http.client.request.time_in_queue against the
// pool's waits over HTTP/2, where a request waits only for a connection
// not yet open: the first request dials, the next ones, sequential and
// concurrent, join the open connection.
func TestWaitsHTTP2(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t, faultserver.TLS())
	p, _, _ := s.instrumented(t, pool.TLSClientConfig(srv.ClientTLSConfig()))
	ctx := bounded(t)
	do(t, ctx, p, srv.URL()+"/ok", -1)
	do(t, ctx, p, srv.URL()+"/ok", -1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { do(t, ctx, p, srv.URL()+"/large", -1) })
	}
	wg.Wait()
	require.NoError(t, p.Quiesce(ctx))
	st := p.Stats()
	require.EqualValues(t, 1, st.Dials)
	rm := s.collect(t)
	n, secs := hist(t, find(t, rm, "http.client.request.time_in_queue"), attribute.String("network.protocol.version", "2"))
	require.EqualValues(t, st.WaitCount, n)
	require.InDelta(t, st.WaitDuration.Seconds(), secs, 1e-6)
	n, _ = hist(t, find(t, rm, "http.client.request.duration"), attribute.String("network.protocol.version", "2"))
	require.EqualValues(t, 10, n)
}

// TestPoolsAddUp registers one Observer with two pools to one server:
// the connections they hold add up.
func TestPoolsAddUp(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t)
	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(s.mp))
	require.NoError(t, err)
	ctx := bounded(t)
	for range 2 {
		p, err := pool.New(pool.WithObserver(o), pool.OnConnClose(o.ConnClosed), pool.OnConnOpen(o.ConnOpened))
		require.NoError(t, err)
		defer p.Close()
		reg, err := o.Register(p)
		require.NoError(t, err)
		defer reg.Unregister()
		do(t, ctx, p, srv.URL()+"/ok", -1)
		require.NoError(t, p.Quiesce(ctx))
	}
	rm := s.collect(t)
	require.EqualValues(t, 2, sum(t, find(t, rm, "http.client.open_connections"), attribute.String("http.connection.state", "idle")))
	n, _ := hist(t, find(t, rm, "http.client.request.duration"))
	require.EqualValues(t, 2, n)
}
