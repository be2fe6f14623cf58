package otelconnaudit_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// points returns the attribute sets and values of a sum metric's points.
func points(t *testing.T, m metricdata.Metrics) map[attribute.Distinct]metricdata.DataPoint[int64] {
	t.Helper()
	d, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is %T", m.Name, m.Data)
	out := map[attribute.Distinct]metricdata.DataPoint[int64]{}
	for _, p := range d.DataPoints {
		out[p.Attributes.Equivalent()] = p
	}
	return out
}

// TestConventionAttributes: over HTTPS, http.client.open_connections,
// http.client.connection.duration and http.client.active_requests carry
// url.scheme, active_requests http.request.method; a connection opened and
// closed unused carries network.protocol.version like the others; and a
// series once reported reads 0 when there is nothing left to count.
func TestConventionAttributes(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t, faultserver.TLS())
	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(s.mp))
	require.NoError(t, err)
	// The second dial waits until the test lets it go on, so that its
	// connection opens once the request it was dialed for took another.
	hold := testserver.HoldDial(2)
	dialed, proceed := hold.Dialed, hold.Proceed
	base := &http.Transport{TLSClientConfig: srv.ClientTLSConfig(), DialContext: hold.DialContext}
	closed := make(chan pool.Conn, 8)
	p, err := pool.Track(base, pool.Protocols(http1()), pool.MaxIdleConnsPerHost(1), pool.WithObserver(o),
		pool.OnConnOpen(func(c pool.Conn) { o.ConnOpened(c); s.opened <- c }),
		pool.OnConnClose(func(c pool.Conn) { o.ConnClosed(c); closed <- c }))
	require.NoError(t, err)
	defer p.Close()
	reg, err := o.Register(p)
	require.NoError(t, err)
	defer reg.Unregister()

	ctx := bounded(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/ok", nil)
	require.NoError(t, err)
	held, err := p.Client().Do(req)
	require.NoError(t, err)

	host, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	server := []attribute.KeyValue{attribute.String("server.address", host), attribute.String("url.scheme", "https")}
	rm := s.collect(t)
	active := find(t, rm, "http.client.active_requests")
	require.EqualValues(t, 1, sum(t, active, append(server, attribute.String("http.request.method", "POST"))...))
	require.Len(t, points(t, active), 1)
	open := find(t, rm, "http.client.open_connections")
	require.EqualValues(t, 1, sum(t, open, append(server, attribute.String("http.connection.state", "active"),
		attribute.String("network.protocol.version", "1.1"))...))
	require.Len(t, points(t, open), 2, "active and idle, idle at 0")

	// A GET waits for a dial, which waits in turn; the POST's connection
	// goes idle and serves the GET; the dial then opens a connection
	// nobody uses, which the full idle pool closes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(t, ctx, p, srv.URL()+"/ok", -1)
	}()
	testserver.Await(t, dialed, "the second dial")
	_, err = io.Copy(io.Discard, held.Body)
	require.NoError(t, err)
	require.NoError(t, held.Body.Close())
	<-done
	close(proceed)
	require.NoError(t, p.WaitFor(ctx, func(st pool.Stats) bool { return st.Dials == 2 && st.Dialing == 0 && st.Closed == 1 }))
	<-closed
	s.opensSeen(t, 2, 0)
	p.CloseIdleConnections()
	require.NoError(t, p.WaitFor(ctx, func(st pool.Stats) bool { return st.Open == 0 }))
	<-closed
	for _, c := range p.Conns() {
		require.Equal(t, "HTTP/1.1", c.Proto, "#%d", c.ID)
	}

	rm = s.collect(t)
	// Every connection's lifetime and setup under one attribute set.
	for _, name := range []string{"http.client.connection.duration", "connaudit.connection.setup.duration"} {
		d, ok := find(t, rm, name).Data.(metricdata.Histogram[float64])
		require.True(t, ok)
		require.Len(t, d.DataPoints, 1, name)
		pt := d.DataPoints[0]
		require.EqualValues(t, 2, pt.Count, name)
		require.True(t, has(pt.Attributes, append(server, attribute.String("network.protocol.version", "1.1"))...), "%s: %v", name, pt.Attributes)
		v, ok := pt.Attributes.Value("server.port")
		require.True(t, ok)
		require.Equal(t, port, v.String())
	}
	// Nothing open, nothing in flight: the series read 0.
	active = find(t, rm, "http.client.active_requests")
	require.Len(t, points(t, active), 2, "POST and GET")
	require.Zero(t, sum(t, active))
	open = find(t, rm, "http.client.open_connections")
	require.Len(t, points(t, open), 2)
	require.Zero(t, sum(t, open))
}
