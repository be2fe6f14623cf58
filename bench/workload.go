// Package bench compares the cost of connaudit's tracer and pool tracking
// with a bare net/http client and with other request tracers, on one
// workload: GET, read the body to EOF, close it, on kept-alive connections
// to a loopback server.
//
// It is a module of its own so that the main module never depends on what
// it is compared with. Run it with run.sh (benchmarks, read with benchstat)
// and compare.sh (the probe's throughput); the README's Performance
// section holds the figures, RESULTS.md their sources.
package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	stdtrace "net/http/httptrace"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/connaudit/connaudit/pool"
	"github.com/tcnksm/go-httpstat"
	"go.opentelemetry.io/contrib/instrumentation/net/http/httptrace/otelhttptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// URLEnv names the environment variable that points the benchmarks at a
// server in another process (such as cmd/okserver), so that allocations
// are the client's alone. It must be a loopback http URL.
const URLEnv = benchpair.URLEnv

// Payload is what the in-process server answers, with a Content-Length.
var Payload = []byte("ok")

// OK answers every request with [Payload].
var OK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(Payload) })

// Target returns the URL the benchmarks send their requests to: the one in
// [URLEnv] if set (it must be an http URL on a loopback address), else an
// in-process server's, which close stops.
func Target() (target string, close func(), err error) {
	if u := os.Getenv(URLEnv); u != "" {
		if err := CheckLoopback(u); err != nil {
			return "", nil, fmt.Errorf("%s: %w", URLEnv, err)
		}
		return u, func() {}, nil
	}
	srv := httptest.NewServer(OK)
	return srv.URL + "/ok", srv.Close, nil
}

// CheckLoopback returns an error unless raw is an http URL whose host is
// a loopback address or "localhost": benchmarks send traffic nowhere else.
func CheckLoopback(raw string) error { return benchpair.CheckLoopback(raw) }

// Base returns the transport every client is built on, set like the one
// [pool.New] builds (and like http.DefaultTransport: a proxy from the
// environment, 90 s idle timeout, 30 s dial timeout and TCP keep-alive),
// capped at conns connections, all
// of which may stay idle. Comparing with it, the difference is the cost of
// tracing and tracking, not of other settings.
func Base(conns int) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxConnsPerHost:        conns,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    conns,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// TracedPool is the traced+tracked client's pool: pool.New capped at
// conns connections per host, all of which may stay idle, as [Base] is, so
// that the two differ only in the tracing and tracking. pool.New alone
// keeps http.DefaultTransport's 2 idle connections per host, which under 4
// workers closes and redials connections.
func TracedPool(conns int) (*pool.Pool, error) {
	return pool.New(pool.MaxConnsPerHost(conns), pool.MaxIdleConnsPerHost(conns))
}

// Client sends the workload's requests one way.
type Client struct {
	Name string
	// Get sends req, reads the body to EOF and closes it. Safe for
	// concurrent use.
	Get func(req *http.Request) error
	// Close releases the client's connections.
	Close func()
	// Dials returns the number of connections dialed so far, or -1.
	Dials func() int64
}

// Clients lists the names [NewClient] knows, in the order they are
// reported.
var Clients = []string{"plain", "traced", "traced+tracked", "httpstat", "otel-noop", "otel-sdk", "naive", "noop-hooks", "min-recorder"}

// Calibration lists clients that [NewClient] also knows and that trace
// nothing: plain, then a fixed stretch of busy CPU work on the caller's
// goroutine after each request. Measured side by side with plain they show
// what a given amount of client CPU per request costs in a benchmark's
// wall time on the machine at hand, so that a tracer's overhead in percent
// can be read as microseconds of work.
var Calibration = []string{"busy-1us", "busy-3us"}

// busy keeps the caller's goroutine busy for d, reading the clock until it
// has passed.
func busy(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// NewClient returns the client called name, with at most conns
// connections:
//
//   - plain: [Base] alone.
//   - traced: connaudit's tracer ([httptrace.NewTransport]) around it, with
//     an observer that does nothing.
//   - traced+tracked: a [pool.New] pool (same settings as Base): tracer,
//     connection tracking, statistics.
//   - httpstat: github.com/tcnksm/go-httpstat, a Result and its ClientTrace
//     per request, End called after the body is closed.
//   - otel-noop: otelhttptrace.NewClientTrace per request with the global
//     (no-op) tracer provider.
//   - otel-sdk: the same with an SDK tracer provider that samples every
//     span into an in-memory exporter through a synchronous span processor
//     (reset every 1024 requests, so memory stays bounded).
//   - naive: a ClientTrace with all sixteen hooks built per request,
//     closures storing time.Now() into a per-request struct, as hand-written
//     tracing often does.
//   - noop-hooks: one ClientTrace, shared by every request, with the hooks
//     connaudit's tracer sets in a pool (all but DNS, connect and
//     WroteHeaderField, which the pool's dialer and nobody replace), each
//     doing nothing: what net/http itself spends on a request so traced,
//     the floor of a tracer built on net/http/httptrace.
//   - min-recorder: the least a tracer can do and still time every stage.
//     The hooks of noop-hooks, each appending its kind and its offset on
//     the monotonic clock to a record recycled from request to request,
//     under the record's mutex (hooks arrive on three goroutines), and a
//     body wrapper that records EOF and Close the same way. No outcome, no
//     observer, no connection identity: the floor of a recording tracer.
//   - busy-1us, busy-3us ([Calibration]): plain, then that much busy CPU
//     work on the caller's goroutine after each request.
func NewClient(name string, conns int) (*Client, error) {
	c := &Client{Name: name, Dials: func() int64 { return -1 }}
	var hc *http.Client
	var closeIdle func()
	switch name {
	case "traced+tracked":
		p, err := TracedPool(conns)
		if err != nil {
			return nil, err
		}
		hc, closeIdle = p.Client(), p.Close
		c.Dials = func() int64 { return p.Stats().Dials }
	case "traced":
		base, dials := counted(Base(conns))
		tr, err := httptrace.NewTransport(base, httptrace.WithObserver(httptrace.ObserverFunc(func(*httptrace.Timeline) {})))
		if err != nil {
			return nil, err
		}
		hc, closeIdle, c.Dials = &http.Client{Transport: tr}, base.CloseIdleConnections, dials
	default:
		base, dials := counted(Base(conns))
		hc, closeIdle, c.Dials = &http.Client{Transport: base}, base.CloseIdleConnections, dials
	}
	c.Close = closeIdle
	switch name {
	case "plain", "traced", "traced+tracked":
		c.Get = func(req *http.Request) error { return get(hc, req) }
	case "httpstat":
		c.Get = func(req *http.Request) error {
			var res httpstat.Result
			err := get(hc, req.WithContext(httpstat.WithHTTPStat(req.Context(), &res)))
			res.End(time.Now())
			return err
		}
	case "otel-noop":
		c.Get = func(req *http.Request) error {
			ctx := req.Context()
			return get(hc, req.WithContext(stdtrace.WithClientTrace(ctx, otelhttptrace.NewClientTrace(ctx))))
		}
	case "otel-sdk":
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		var n atomic.Int64
		c.Close = func() {
			closeIdle()
			tp.Shutdown(context.Background())
		}
		c.Get = func(req *http.Request) error {
			ctx := req.Context()
			ct := otelhttptrace.NewClientTrace(ctx, otelhttptrace.WithTracerProvider(tp))
			err := get(hc, req.WithContext(stdtrace.WithClientTrace(ctx, ct)))
			if n.Add(1)%1024 == 0 {
				exp.Reset()
			}
			return err
		}
	case "busy-1us", "busy-3us":
		d, err := time.ParseDuration(strings.TrimPrefix(name, "busy-"))
		if err != nil {
			closeIdle()
			return nil, err
		}
		c.Get = func(req *http.Request) error {
			err := get(hc, req)
			busy(d)
			return err
		}
	case "noop-hooks":
		ct := noopTrace()
		c.Get = func(req *http.Request) error {
			return get(hc, req.WithContext(stdtrace.WithClientTrace(req.Context(), ct)))
		}
	case "min-recorder":
		hc = &http.Client{Transport: &minRecorder{base: hc.Transport}}
		c.Get = func(req *http.Request) error { return get(hc, req) }
	case "naive":
		c.Get = func(req *http.Request) error {
			var st naiveStats
			ctx := stdtrace.WithClientTrace(req.Context(), st.trace())
			return get(hc, req.WithContext(ctx))
		}
	default:
		closeIdle()
		return nil, fmt.Errorf("bench: unknown client %q (want one of %s)", name, strings.Join(slices.Concat(Clients, Calibration), ", "))
	}
	return c, nil
}

// get is the workload: send, read to EOF, close.
func get(hc *http.Client, req *http.Request) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// counted wraps base's dialer to count dials, so that a benchmark can
// check it measured kept-alive connections.
func counted(base *http.Transport) (*http.Transport, func() int64) {
	var n atomic.Int64
	dial := base.DialContext
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return base, n.Load
}

// naiveStats is what a hand-written tracer records.
type naiveStats struct {
	mu                                                   sync.Mutex
	getConn, gotConn, dnsStart, dnsDone, connStart       time.Time
	connDone, tlsStart, tlsDone, wroteHeaders, wroteReq  time.Time
	firstByte, putIdle, got100, wait100, got1xx, wroteHF time.Time
	reused, wasIdle                                      bool
}

func (s *naiveStats) mark(t *time.Time) {
	now := time.Now()
	s.mu.Lock()
	*t = now
	s.mu.Unlock()
}

func (s *naiveStats) trace() *stdtrace.ClientTrace {
	return &stdtrace.ClientTrace{
		GetConn: func(string) { s.mark(&s.getConn) },
		GotConn: func(i stdtrace.GotConnInfo) {
			s.mark(&s.gotConn)
			s.mu.Lock()
			s.reused, s.wasIdle = i.Reused, i.WasIdle
			s.mu.Unlock()
		},
		PutIdleConn:          func(error) { s.mark(&s.putIdle) },
		GotFirstResponseByte: func() { s.mark(&s.firstByte) },
		Got100Continue:       func() { s.mark(&s.got100) },
		Got1xxResponse:       func(int, textproto.MIMEHeader) error { s.mark(&s.got1xx); return nil },
		DNSStart:             func(stdtrace.DNSStartInfo) { s.mark(&s.dnsStart) },
		DNSDone:              func(stdtrace.DNSDoneInfo) { s.mark(&s.dnsDone) },
		ConnectStart:         func(string, string) { s.mark(&s.connStart) },
		ConnectDone:          func(string, string, error) { s.mark(&s.connDone) },
		TLSHandshakeStart:    func() { s.mark(&s.tlsStart) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { s.mark(&s.tlsDone) },
		WroteHeaderField:     func(string, []string) { s.mark(&s.wroteHF) },
		WroteHeaders:         func() { s.mark(&s.wroteHeaders) },
		Wait100Continue:      func() { s.mark(&s.wait100) },
		WroteRequest:         func(stdtrace.WroteRequestInfo) { s.mark(&s.wroteReq) },
	}
}

// noopTrace returns a ClientTrace with the hooks connaudit's tracer sets
// when the pool's dialer reports DNS and connect events, each doing
// nothing. newMinRecord sets the same hooks, each recording: keep the two
// lists alike, so that the two floors differ in the recording alone.
func noopTrace() *stdtrace.ClientTrace {
	return &stdtrace.ClientTrace{
		GetConn:              func(string) {},
		GotConn:              func(stdtrace.GotConnInfo) {},
		PutIdleConn:          func(error) {},
		GotFirstResponseByte: func() {},
		Got1xxResponse:       func(int, textproto.MIMEHeader) error { return nil },
		TLSHandshakeStart:    func() {},
		TLSHandshakeDone:     func(tls.ConnectionState, error) {},
		WroteHeaders:         func() {},
		Wait100Continue:      func() {},
		WroteRequest:         func(stdtrace.WroteRequestInfo) {},
	}
}

// minRecorder is the min-recorder client's RoundTripper (see [NewClient]).
type minRecorder struct {
	base    http.RoundTripper
	records sync.Pool
}

// minEvent is what minRecorder records of one hook.
type minEvent struct {
	kind uint8
	at   time.Duration
}

// minRecord is one request's record. Its hooks are built once and serve
// request after request.
type minRecord struct {
	mu     sync.Mutex
	start  time.Time
	events []minEvent
	buf    [16]minEvent
	trace  stdtrace.ClientTrace
}

func (r *minRecord) mark(kind uint8) {
	at := time.Since(r.start)
	r.mu.Lock()
	if len(r.events) < len(r.buf) {
		r.events = append(r.events, minEvent{kind, at})
	}
	r.mu.Unlock()
}

func newMinRecord() *minRecord {
	r := new(minRecord)
	r.trace = stdtrace.ClientTrace{
		GetConn:              func(string) { r.mark(1) },
		GotConn:              func(stdtrace.GotConnInfo) { r.mark(2) },
		PutIdleConn:          func(error) { r.mark(3) },
		GotFirstResponseByte: func() { r.mark(4) },
		Got1xxResponse:       func(int, textproto.MIMEHeader) error { r.mark(5); return nil },
		TLSHandshakeStart:    func() { r.mark(6) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { r.mark(7) },
		WroteHeaders:         func() { r.mark(8) },
		Wait100Continue:      func() { r.mark(9) },
		WroteRequest:         func(stdtrace.WroteRequestInfo) { r.mark(10) },
	}
	return r
}

func (m *minRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r, _ := m.records.Get().(*minRecord)
	if r == nil {
		r = newMinRecord()
	}
	r.mu.Lock()
	r.start, r.events = time.Now(), r.buf[:0]
	r.mu.Unlock()
	resp, err := m.base.RoundTrip(req.WithContext(stdtrace.WithClientTrace(req.Context(), &r.trace)))
	if err != nil {
		// Not recycled: a hook of the failed request may still fire.
		return nil, err
	}
	r.mark(11)
	resp.Body = &minBody{rc: resp.Body, r: r, m: m}
	return resp, nil
}

// minBody records a body's EOF and Close; the record is recycled at Close.
type minBody struct {
	rc io.ReadCloser
	r  *minRecord
	m  *minRecorder
}

func (b *minBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.r.mark(12)
	}
	return n, err
}

func (b *minBody) Close() error {
	err := b.rc.Close()
	b.r.mark(13)
	b.m.records.Put(b.r)
	return err
}

// Run sends n requests to target through c from workers goroutines at
// once, and returns the first error.
func Run(c *Client, target string, workers, n int) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range workers {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			return err
		}
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := c.Get(req); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}
