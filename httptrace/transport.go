package httptrace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	stdtrace "net/http/httptrace"
	"net/textproto"
	"runtime"
	"sync"
	"time"
)

// Transport is an [http.RoundTripper] that records a [Timeline] for every
// request it carries and hands it to an [Observer]. It is safe for
// concurrent use. Build it with [NewTransport].
type Transport struct {
	base      http.RoundTripper
	obs       Observer
	events    EventObserver
	kinds     KindSet // the kinds events wants
	dialHooks bool
	bodyIdle  time.Duration
	headers   []string
	// secretHeaders are the header names whose values are masked in every
	// error text and recorded header, beside Authorization,
	// Proxy-Authorization and Cookie.
	secretHeaders []string
	unclosed      func(UnclosedBody)
	max1xx        int64 // bound on the bytes of a request's 1xx responses
	recorders     sync.Pool
}

// defaultMax1xx is net/http's default MaxResponseHeaderBytes, the bound on
// 1xx responses when the base is not an *http.Transport that sets one.
const defaultMax1xx = 10 << 20

// Option configures a [Transport].
type Option interface {
	apply(*Transport) error
}

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithObserver sets the observer of finished timelines. An observer that is
// also an [EventObserver] receives every event as it is recorded, or those
// of the kinds it asks for ([EventFilter]). Several observers combine with
// [Multi].
func WithObserver(o Observer) Option {
	return optionFunc(func(t *Transport) error {
		if o == nil {
			return errors.New("httptrace: nil observer")
		}
		t.obs = o
		t.events, _ = o.(EventObserver)
		if m, ok := o.(multi); ok && len(m.events) == 1 {
			// Events go straight to the one observer that wants them:
			// each would otherwise pay a call to the combination's loop.
			// (With none, the combination wants no kind of event.)
			t.events = m.events[0]
		}
		t.kinds = 0
		if t.events != nil {
			t.kinds = eventKinds(t.events)
		}
		return nil
	})
}

// WithDialerHooks declares that the base transport's dialer calls
// [DialTrace] on its context, so DNS and connect events are recorded from
// inside the dial. The request's trace then carries no DNS or connect hooks,
// which spares net/http a few allocations on every request that does not
// dial. Without a dialer that calls DialTrace, DNS and connect events are
// lost.
func WithDialerHooks() Option {
	return optionFunc(func(t *Transport) error {
		t.dialHooks = true
		return nil
	})
}

// WithBodyIdleTimeout bounds the time the response body may make no
// progress: when no byte arrives for d (counted from the response headers,
// and again from each read that returned data), the request's context is
// cancelled with cause [ErrBodyIdleTimeout] and the next Read fails. It is a
// per-request watchdog, not a read deadline on the connection (which would
// also hit idle connections) and not a total deadline: a body that trickles
// slowly but steadily is not cut. A caller that stops reading also stops
// progress. Zero disables it.
func WithBodyIdleTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d < 0 {
			return fmt.Errorf("httptrace: body idle timeout %v is negative", d)
		}
		t.bodyIdle = d
		return nil
	})
}

// WithHeaders records the values of the named request headers in
// [Timeline.Header]. Authorization, Proxy-Authorization, Cookie and
// Set-Cookie are recorded masked whatever is asked.
func WithHeaders(names ...string) Option {
	return optionFunc(func(t *Transport) error {
		return addHeaderNames(&t.headers, names)
	})
}

// addHeaderNames appends names to *to as canonical keys; an empty name is
// an error.
func addHeaderNames(to *[]string, names []string) error {
	for _, n := range names {
		if n == "" {
			return errors.New("httptrace: empty header name")
		}
		*to = append(*to, textproto.CanonicalMIMEHeaderKey(n))
	}
	return nil
}

// WithSecretHeaders declares the named request headers secret, as
// Authorization, Proxy-Authorization and Cookie always are: their values
// are masked in the error texts of every output (a server may quote what
// it was sent in a malformed reply, which net/http's error then quotes)
// and in the headers recorded with [WithHeaders].
func WithSecretHeaders(names ...string) Option {
	return optionFunc(func(t *Transport) error {
		return addHeaderNames(&t.secretHeaders, names)
	})
}

// UnclosedBody describes a response body that was garbage collected without
// being closed. It holds no reference to the response.
type UnclosedBody struct {
	// Timeline is the id of the request's timeline.
	Timeline uint64
	Method   string
	// URL is redacted.
	URL string
	// Conn is the id of the connection that served the request.
	Conn uint64
}

// WithUnclosedBodyReport calls report for each response body that is
// garbage collected without having been closed. It costs a cleanup
// registration per request. report runs on the runtime's cleanup
// goroutine and must return quickly.
func WithUnclosedBodyReport(report func(UnclosedBody)) Option {
	return optionFunc(func(t *Transport) error {
		if report == nil {
			return errors.New("httptrace: nil unclosed-body report")
		}
		t.unclosed = report
		return nil
	})
}

// NewTransport returns a Transport that records the requests it sends
// through base. base must not be nil: use a transport of your own, never
// http.DefaultTransport shared with the rest of the program.
func NewTransport(base http.RoundTripper, opts ...Option) (*Transport, error) {
	if base == nil {
		return nil, errors.New("httptrace: nil base RoundTripper")
	}
	t := &Transport{base: base, max1xx: defaultMax1xx}
	if ht, ok := base.(*http.Transport); ok && ht.MaxResponseHeaderBytes > 0 {
		t.max1xx = ht.MaxResponseHeaderBytes
	}
	for _, o := range opts {
		if err := o.apply(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Base returns the RoundTripper t wraps.
func (t *Transport) Base() http.RoundTripper { return t.base }

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type recorderKey struct{}

// requestContext is the context of a request traced by a Transport built
// [WithDialerHooks] whose caller set no ClientTrace: a single value that
// net/http reads as carrying the recorder's ClientTrace and [DialTrace]
// reads as carrying the recorder, where stdtrace.WithClientTrace and
// context.WithValue would allocate one layer each. It is immutable and
// allocated per request (a recycled one could be read by net/http after
// the request ended, for instance when its readLoop cancels the request's
// child context).
type requestContext struct {
	context.Context
	trace *stdtrace.ClientTrace
	r     *recorder
}

// requestContextBody is a request's context and its response body wrapper,
// allocated together.
type requestContextBody struct {
	ctx  requestContext
	body body
}

// newRequestContextBody returns a request context carrying ct and r over
// ctx, and the body wrapper allocated with it.
func newRequestContextBody(ctx context.Context, ct *stdtrace.ClientTrace, r *recorder) (context.Context, *body) {
	rc := &requestContextBody{ctx: requestContext{Context: ctx, trace: ct, r: r}}
	return &rc.ctx, &rc.body
}

func (c *requestContext) Value(key any) any {
	switch key {
	case clientTraceKey:
		return c.trace
	case recorderKey{}:
		return c.r
	}
	return c.Context.Value(key)
}

func (c *requestContext) String() string {
	return fmt.Sprintf("%v.WithValue(httptrace)", c.Context)
}

// clientTraceKey is the key under which net/http/httptrace stores a
// ClientTrace in a context: a value of an unexported type, learnt by asking
// [stdtrace.ContextClientTrace] to look one up. It is nil, and
// requestContext unused, unless a context answering that key is read as
// carrying the trace, and WithClientTrace stores it under that key.
var clientTraceKey = findClientTraceKey()

// keyProbe records the first key it is asked for.
type keyProbe struct {
	context.Context
	key  any
	asks int
}

func (p *keyProbe) Value(key any) any {
	p.asks++
	if p.asks == 1 {
		p.key = key
	}
	return nil
}

func findClientTraceKey() any {
	p := &keyProbe{Context: context.Background()}
	if stdtrace.ContextClientTrace(p) != nil || p.asks != 1 || p.key == nil {
		return nil
	}
	ct := &stdtrace.ClientTrace{}
	if stdtrace.WithClientTrace(context.Background(), ct).Value(p.key) != ct {
		return nil
	}
	if stdtrace.ContextClientTrace(&keyAnswer{Context: context.Background(), key: p.key, val: ct}) != ct {
		return nil
	}
	return p.key
}

// keyAnswer answers one key, as requestContext does.
type keyAnswer struct {
	context.Context
	key, val any
}

func (a *keyAnswer) Value(key any) any {
	if key == a.key {
		return a.val
	}
	return a.Context.Value(key)
}

// TimelineID returns the id of the timeline of the request on whose behalf
// net/http dials with ctx, for a [Transport] built [WithDialerHooks], or 0.
// A dialer uses it to tie the connection it makes to the request that
// caused the dial (events of that timeline, such as the TLS handshake,
// then concern that connection).
func TimelineID(ctx context.Context) uint64 {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tl.ID
}

// DialTrace returns ctx with DNS and connect hooks that record into the
// timeline of the request on whose behalf net/http dials. A DialContext
// wrapper calls it on the context it was given, for a [Transport] built
// [WithDialerHooks]. For other contexts it returns ctx unchanged.
func DialTrace(ctx context.Context) context.Context {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	if r == nil {
		return ctx
	}
	r.mu.Lock()
	if !r.tl.Finished && !r.gotConn {
		// The Transport dials for this request: it is connecting now,
		// even before the dialer reports DNS or connect events.
		r.phase = StageConnect
	}
	r.mu.Unlock()
	ct := &stdtrace.ClientTrace{}
	r.addNetHooks(ct)
	return stdtrace.WithClientTrace(ctx, ct)
}

func (t *Transport) recorder() *recorder {
	if r, ok := t.recorders.Get().(*recorder); ok {
		return r
	}
	return newRecorder(t)
}

// RoundTrip sends req through the base transport and records its timeline.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.recorder()
	r.begin(req)
	ct := r.trace(req)
	var (
		ctx     context.Context
		wrapper *body // allocated with the context, when it can be
	)
	if t.bodyIdle == 0 && t.unclosed == nil && t.dialHooks && clientTraceKey != nil &&
		stdtrace.ContextClientTrace(r.ctx) == nil {
		// The common case, that of a pool: one context value instead of
		// two, answering both net/http's ClientTrace lookup and
		// DialTrace's recorder lookup. The hooks carry no DNS or connect
		// hooks (the dialer adds them), so WithClientTrace would add
		// nothing else. The body wrapper comes in the same allocation.
		ctx, wrapper = newRequestContextBody(r.ctx, ct, r)
	} else {
		ctx, wrapper = t.requestContext(r, ct)
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil || resp == nil {
		return nil, r.failed(resp, err)
	}
	r.roundTripDone(resp, nil)
	resp.Request = req
	if resp.Body == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		r.noBody()
		return resp, nil
	}
	b := wrapper
	if b == nil {
		b = new(body)
	}
	*b = body{rc: resp.Body, r: r, gen: r.gen}
	if t.unclosed != nil {
		t.reportUnclosed(b, r)
	}
	r.bodyStarted(resp.Body == http.NoBody)
	resp.Body = b
	return resp, nil
}

// requestContext returns the context of a request r traces with ct, and
// the body wrapper allocated with it if it was, in the cases other than
// RoundTrip's common one: a body idle watchdog, a caller's own ClientTrace
// to compose with, unclosed bodies reported, or no dialer hooks.
func (t *Transport) requestContext(r *recorder, ct *stdtrace.ClientTrace) (context.Context, *body) {
	ctx := r.ctx
	if t.bodyIdle > 0 {
		ctx, r.cancel = context.WithCancelCause(ctx)
	}
	if stdtrace.ContextClientTrace(ctx) != nil {
		// Compose a fresh copy: WithClientTrace changes it in place to
		// call the caller's hooks too, so it is never used again.
		own := ct
		ct = new(stdtrace.ClientTrace)
		*ct = *own
		r.tl.Composed = true
	}
	switch {
	case t.dialHooks && !r.tl.Composed && clientTraceKey != nil && t.unclosed == nil:
		// As in RoundTrip's common case. (Not when unclosed bodies are
		// reported: net/http holds the context of a body left open, which
		// would keep a wrapper allocated with it reachable and its cleanup
		// from ever running.)
		return newRequestContextBody(ctx, ct, r)
	case t.dialHooks && !r.tl.Composed && clientTraceKey != nil:
		return &requestContext{Context: ctx, trace: ct, r: r}, nil
	case t.dialHooks:
		ctx = stdtrace.WithClientTrace(ctx, ct)
		return context.WithValue(ctx, recorderKey{}, r), nil
	}
	return stdtrace.WithClientTrace(ctx, ct), nil
}

// failed records the failure of the base RoundTripper and returns the
// error to give the caller.
func (r *recorder) failed(resp *http.Response, err error) error {
	if err == nil {
		err = errors.New("httptrace: base RoundTripper returned neither response nor error")
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	r.roundTripDone(nil, err)
	return err
}

// noBody ends a request whose response has no body to wait for (or whose
// connection was handed over to the caller, 101 Switching Protocols).
func (r *recorder) noBody() {
	r.mu.Lock()
	r.finishLocked(ClassOK, StageBody, nil, 0)
	r.mu.Unlock()
}

// reportUnclosed registers the cleanup that reports b if it is garbage
// collected without having been closed.
func (t *Transport) reportUnclosed(b *body, r *recorder) {
	info := UnclosedBody{Timeline: r.tl.ID, Method: r.tl.Method, URL: r.tl.URL(), Conn: r.tl.Conn.ID}
	b.cleanup = runtime.AddCleanup(b, t.unclosed, info)
	b.hasCleanup = true
}

// body wraps a response body to record reads, EOF and Close.
type body struct {
	rc         io.ReadCloser
	r          *recorder
	gen        uint64
	cleanup    runtime.Cleanup
	hasCleanup bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && b.r.t.bodyIdle > 0 && !errors.Is(err, ErrBodyIdleTimeout) && b.r.idleFiredFor(b.gen) {
		// HTTP/2 reports the watchdog's cancellation as context.Canceled,
		// without its cause: say it.
		err = fmt.Errorf("%w (%w)", ErrBodyIdleTimeout, err)
	}
	if n > 0 || err != nil {
		b.r.bodyRead(b.gen, n, err)
	}
	return n, err
}

func (b *body) Close() error {
	if b.hasCleanup {
		b.cleanup.Stop()
	}
	// Record the close first, so that an observer knows the body was
	// closed early before the Transport closes the connection because of
	// it. No hook of this request fires during the underlying Close.
	reuse := b.r.bodyClose(b.gen)
	err := b.rc.Close()
	if reuse {
		r := b.r
		r.reset()
		r.t.recorders.Put(r)
	}
	return err
}
