package otelconnaudit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/connaudit/connaudit/otelconnaudit"

// Observer exports a pool's numbers as OpenTelemetry metrics and each
// request's stages as spans. It is an [httptrace.EventObserver] for
// [pool.WithObserver] and connection hooks for [pool.OnConnClose]
// ([Observer.ConnClosed]) and [pool.OnConnOpen] ([Observer.ConnOpened]); its
// [Observer.Register] reads the pool's own numbers at each collection.
// One Observer may serve several pools: their numbers add up, as those of
// two .NET handlers do. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer // nil: no spans

	meter        metric.Meter // nil: no metrics
	reqDuration  metric.Float64Histogram
	timeInQueue  metric.Float64Histogram
	connDuration metric.Float64Histogram
	connSetup    metric.Float64Histogram
	retries      metric.Int64Counter
	openConns    metric.Int64ObservableUpDownCounter
	activeReqs   metric.Int64ObservableUpDownCounter
	openBodies   metric.Int64ObservableUpDownCounter
	closes       metric.Int64ObservableCounter

	sets setCache
}

// Bucket boundaries, in seconds: those the conventions advise for request
// durations (short) and connection lifetimes (long); for the waits and
// setups of a pool, which take tens of microseconds to milliseconds where
// the conventions' first bound is 5ms, the pool's own
// (pool.DurationBuckets, 25µs to 10s), as promconnaudit's.
var (
	shortBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	longBuckets  = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	poolBuckets  = func() []float64 {
		var b []float64
		for _, d := range pool.DurationBuckets() {
			b = append(b, d.Seconds())
		}
		return b
	}()
)

// NewObserver returns an Observer exporting through the providers that
// opts give ([MeterProvider], [TracerProvider]); at least one is needed.
func NewObserver(opts ...Option) (*Observer, error) {
	var cfg config
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("otelconnaudit: nil option")
		}
		if err := opt.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.mp == nil && cfg.tp == nil {
		return nil, errors.New("otelconnaudit: neither MeterProvider nor TracerProvider given")
	}
	o := &Observer{}
	if cfg.tp != nil {
		o.tracer = cfg.tp.Tracer(ScopeName)
	}
	if cfg.mp != nil {
		if err := o.instruments(cfg.mp.Meter(ScopeName)); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (o *Observer) instruments(m metric.Meter) error {
	var err, e error
	o.meter = m
	o.reqDuration, e = m.Float64Histogram("http.client.request.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of HTTP client requests."),
		metric.WithExplicitBucketBoundaries(shortBuckets...))
	err = errors.Join(err, e)
	o.timeInQueue, e = m.Float64Histogram("http.client.request.time_in_queue",
		metric.WithUnit("s"), metric.WithDescription("The amount of time requests spent on a queue waiting for an available connection."),
		metric.WithExplicitBucketBoundaries(poolBuckets...))
	err = errors.Join(err, e)
	o.connDuration, e = m.Float64Histogram("http.client.connection.duration",
		metric.WithUnit("s"), metric.WithDescription("The duration of the successfully established outbound HTTP connections."),
		metric.WithExplicitBucketBoundaries(longBuckets...))
	err = errors.Join(err, e)
	o.connSetup, e = m.Float64Histogram("connaudit.connection.setup.duration",
		metric.WithUnit("s"), metric.WithDescription("The time outbound HTTP connections took to set up, from the start of the dial to the TLS handshake done."),
		metric.WithExplicitBucketBoundaries(poolBuckets...))
	err = errors.Join(err, e)
	o.retries, e = m.Int64Counter("connaudit.request.hidden_retries",
		metric.WithUnit("{retry}"), metric.WithDescription("Times the Transport sent a request again on another connection, unseen by the caller."))
	err = errors.Join(err, e)
	o.openConns, e = m.Int64ObservableUpDownCounter("http.client.open_connections",
		metric.WithUnit("{connection}"), metric.WithDescription("Number of outbound HTTP connections that are currently active or idle on the client."))
	err = errors.Join(err, e)
	o.activeReqs, e = m.Int64ObservableUpDownCounter("http.client.active_requests",
		metric.WithUnit("{request}"), metric.WithDescription("Number of active HTTP requests."))
	err = errors.Join(err, e)
	o.openBodies, e = m.Int64ObservableUpDownCounter("connaudit.response.open_bodies",
		metric.WithUnit("{body}"), metric.WithDescription("Response bodies handed out and not yet closed."))
	err = errors.Join(err, e)
	o.closes, e = m.Int64ObservableCounter("connaudit.connection.closes",
		metric.WithUnit("{connection}"), metric.WithDescription("Connections closed, by the side that closed them and why."))
	return errors.Join(err, e)
}

// requestContext returns the context of tl's request, whose span the
// stages go under and whose trace metrics exemplars refer to.
func requestContext(tl *httptrace.Timeline) context.Context {
	if ctx := hook.Context(tl); ctx != nil {
		return ctx
	}
	return context.Background()
}

// ObserveEvent implements [httptrace.EventObserver]. When the response
// headers arrive it records the request's duration and its wait for a
// connection, and ends the spans of the stages before the body: they are
// exported then, even if the body is never closed.
func (o *Observer) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	if ev.Kind != vocab.KindResponse || ev.Late {
		return
	}
	ctx := requestContext(tl)
	if o.meter != nil {
		o.recordRequest(ctx, tl, ev.At)
	}
	if o.tracer != nil {
		o.headerSpans(ctx, tl)
	}
}

// Observe implements [httptrace.Observer]: at the end of a request it
// records what only the end tells (a failure before any response, hidden
// retries) and exports the span of the body's transfer.
func (o *Observer) Observe(tl *httptrace.Timeline) {
	ctx := requestContext(tl)
	responded := tl.Status != 0
	if o.meter != nil {
		if !responded {
			o.recordRequest(ctx, tl, lastAt(tl, vocab.KindDone))
		}
		if tl.Retries > 0 {
			o.retries.Add(ctx, int64(tl.Retries), o.sets.get(requestKey(setRetries, tl)).add...)
		}
	}
	if o.tracer != nil {
		if !responded {
			o.headerSpans(ctx, tl)
		}
		o.bodySpan(ctx, tl)
	}
}

// requestKey returns the key of the attribute set of tl's request for
// instrument kind.
func requestKey(kind setKind, tl *httptrace.Timeline) setKey {
	u := tl.RawURL()
	host := u.Host
	if host == "" {
		host = tl.Host
	}
	k := setKey{kind: kind, method: tl.Method, scheme: u.Scheme, host: host}
	switch kind {
	case setDuration:
		k.proto, k.status = tl.Proto, tl.Status
		if tl.Status == 0 {
			k.errTyp = string(tl.Outcome.Class)
		} else if tl.Status >= 400 {
			k.errTyp = strconv.Itoa(tl.Status)
		}
	case setQueue:
		k.proto = tl.Proto
	}
	return k
}

// recordRequest records the duration of tl's request, which ended or got
// its response headers at offset end, and its wait for a connection.
func (o *Observer) recordRequest(ctx context.Context, tl *httptrace.Timeline, end time.Duration) {
	o.reqDuration.Record(ctx, end.Seconds(), o.sets.get(requestKey(setDuration, tl)).rec...)
	var buf [4]time.Duration
	waits := queued(tl, buf[:0])
	if len(waits) == 0 {
		return
	}
	opts := o.sets.get(requestKey(setQueue, tl)).rec
	for _, w := range waits {
		o.timeInQueue.Record(ctx, w.Seconds(), opts...)
	}
}

// queued appends to waits each time tl's request spent waiting for a
// connection, as the pool counts them in Stats.Waits (and the requests
// that waited in Stats.WaitCount): a request waited unless the Transport
// handed it an open connection at once (an idle one; over HTTP/2, one
// already open). A retried request waits once per attempt that waited.
func queued(tl *httptrace.Timeline, waits []time.Duration) []time.Duration {
	last := -1
	for i := len(tl.Events) - 1; i >= 0; i-- {
		if e := &tl.Events[i]; e.Kind == vocab.KindGotConn && !e.Late {
			last = i
			break
		}
	}
	if last < 0 {
		return waits
	}
	h2 := strings.HasPrefix(tl.Proto, "HTTP/2") || tl.TLS.ALPN == "h2"
	getConn := time.Duration(-1)
	for i := range tl.Events[:last+1] {
		e := &tl.Events[i]
		if e.Late {
			continue
		}
		switch e.Kind {
		case vocab.KindGetConn:
			if getConn < 0 {
				getConn = e.At
			}
		case vocab.KindGotConn:
			if getConn < 0 {
				continue
			}
			w := e.N == 0 // a new connection (GotConnInfo.Reused false)
			if i == last && !h2 {
				w = !tl.Conn.WasIdle
			}
			if w {
				waits = append(waits, e.At-getConn)
			}
			getConn = -1
		}
	}
	return waits
}

// lastAt returns the offset of the last event of kind k that was not late,
// or of the last event.
func lastAt(tl *httptrace.Timeline, k httptrace.Kind) time.Duration {
	for i := len(tl.Events) - 1; i >= 0; i-- {
		if e := &tl.Events[i]; e.Kind == k && !e.Late {
			return e.At
		}
	}
	if n := len(tl.Events); n > 0 {
		return tl.Events[n-1].At
	}
	return 0
}

// ConnClosed records the lifetime of a connection that closed, from when
// it was established (its TLS handshake done, if any) to its close, in
// http.client.connection.duration: pass it to [pool.OnConnClose].
// A connection that never got established (its handshake failed) is not
// recorded.
func (o *Observer) ConnClosed(c pool.Conn) {
	if o.meter == nil || c.ClosedAt.IsZero() {
		return
	}
	var opened time.Time
	for _, h := range c.History {
		if h.State == vocab.StateIdle || h.State == vocab.StateActive {
			opened = h.At
			break
		}
	}
	if opened.IsZero() {
		return
	}
	k := setKey{kind: setConnDuraton, host: c.Host, proto: c.Proto, scheme: c.Scheme}
	o.connDuration.Record(context.Background(), c.ClosedAt.Sub(opened).Seconds(), o.sets.get(k).rec...)
}

// ConnOpened records how long a connection took to set up, from the start
// of its dial to its establishment (its TLS handshake done, if any), in
// connaudit.connection.setup.duration: pass it to [pool.OnConnOpen].
func (o *Observer) ConnOpened(c pool.Conn) {
	if o.meter == nil {
		return
	}
	for _, h := range c.History {
		if h.State == vocab.StateIdle || h.State == vocab.StateActive {
			k := setKey{kind: setConnDuraton, host: c.Host, proto: c.Proto, scheme: c.Scheme}
			o.connSetup.Record(context.Background(), h.At.Sub(c.DialedAt).Seconds(), o.sets.get(k).rec...)
			return
		}
	}
}
