// Package otelconnaudit exports a connaudit pool's numbers as
// OpenTelemetry metrics and each request's stages as spans, named as the
// OpenTelemetry semantic conventions (v1.43.0) and .NET's HTTP client name
// them.
//
// An [Observer] is handed to the pool at construction, as its observer and
// its connection hooks, and registered with the pool once built:
//
//	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(mp), otelconnaudit.TracerProvider(tp))
//	p, err := pool.New(pool.WithObserver(o), pool.OnConnClose(o.ConnClosed), pool.OnConnOpen(o.ConnOpened))
//	reg, err := o.Register(p)
//
// To keep another observer (a slog logger, say), combine the two with
// [httptrace.Multi].
//
// # Metrics
//
// Read from the pool at each collection (observable instruments, no cost
// on the request's path):
//
//	http.client.open_connections  UpDownCounter {connection}  http.connection.state (active, idle), server.address, server.port, network.protocol.version, url.scheme
//	http.client.active_requests   UpDownCounter {request}     http.request.method, server.address, server.port, url.scheme: requests not finished (body not closed)
//	connaudit.response.open_bodies UpDownCounter {body}       server.address, server.port
//	connaudit.connection.closes   Counter {connection}        server.address, server.port, connaudit.close.side (client, server), connaudit.close.reason (pool.CloseReason)
//
// A series once reported stays, at 0 when nothing is left to count (a
// host's last connection closed, its last request ended), while the pool
// is registered.
//
// Recorded as requests and connections go:
//
//	http.client.request.duration       Histogram s   to the response headers (or the failure); http.request.method, server.address, server.port, url.scheme, network.protocol.version, http.response.status_code, error.type (outcome class, or the status from 400)
//	http.client.request.time_in_queue  Histogram s   each wait for a connection, as Stats.Waits counts it (a request the Transport sent again waits once per attempt); http.request.method, server.address, server.port, url.scheme, network.protocol.version
//	http.client.connection.duration    Histogram s   from established to closed (pool.OnConnClose); server.address, server.port, network.protocol.version, url.scheme
//	connaudit.connection.setup.duration Histogram s  from the dial's start to established, its TLS handshake done (pool.OnConnOpen), as Stats.Setups counts it; the attributes of connection.duration
//	connaudit.request.hidden_retries   Counter {retry}  the Transport's retries the caller never saw; http.request.method, server.address, server.port, url.scheme
//
// A connection's network.protocol.version is known from when it opens
// (pool.Conn.Proto), so that one opened and closed unused is counted with
// the others. request.duration and connection.duration use the buckets
// the conventions advise; time_in_queue and setup.duration the pool's
// ([pool.DurationBuckets], 25µs to 10s, as promconnaudit's), given as
// advice (metric.WithExplicitBucketBoundaries), which a View overrides:
// a wait on a kept-alive pool takes tens to hundreds of microseconds,
// where the conventions' first bound is 5ms. Their attribute
// sets are built once per combination (up to 1024) and reused: a request
// on a kept-alive connection records its duration with no allocation of
// its own.
//
// # Spans
//
// Each stage of a request is a child span of the span in the request's
// context (typically otelhttp's client span), when that span is sampled;
// a request without one gets no spans. Child spans and not span events:
// a stage has a length, which trace views draw as a bar, and a child span
// can be exported after its parent ended, where an event added to an
// ended span is lost (a body read after the caller's span ended, hooks
// firing after the request ended). The spans are made from the
// request's timeline once its stages are known, each started and ended in
// one call with the recorded times, so none is left open or ended twice,
// over HTTP/2 as over HTTP/1:
//
//	HTTP wait_for_connection host:port   getting a connection, when the request was not handed an open one at once
//	  DNS lookup host                    the lookup of a dial made for the request
//	  socket connect addr:port           each connect of that dial
//	  TLS client handshake host          its handshake
//	HTTP write_request                   writing the request (Timings.Write)
//	HTTP wait_for_response               to the first response byte (Timings.Server)
//	HTTP read_response_body              to the body's EOF, or its close (Timings.Transfer)
//
// The spans up to the response are exported when the response headers
// arrive, so a body never closed still shows them; the body's when it is
// closed. The wait's span less its children is Timings.PoolWait. The stage
// in which a request failed has status Error, error.type its outcome
// class and, as description, its error redacted as every connaudit output
// is. No span carries the URL or a header: host, port and addresses only.
package otelconnaudit
