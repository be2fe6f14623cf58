package httptrace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	stdtrace "net/http/httptrace"
	"runtime"
	"sync"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/isnil"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Transport is an [http.RoundTripper] that records a [Timeline] for every
// request it carries and hands it to an [Observer]. It is safe for
// concurrent use. Build it with [NewTransport].
type Transport struct {
	base      http.RoundTripper
	observers []Observer // as the options added them
	obs       Observer   // all of observers
	events    EventObserver
	kinds     vocab.KindSet // the kinds events wants
	// kindEvents is events if it takes each event with its kind's bit.
	kindEvents hook.KindObserver[*Timeline, *Event]
	dialHooks  bool
	bodyIdle   time.Duration
	headers    []string
	// secretHeaders are the header names whose values are masked in every
	// error text and recorded header, beside Authorization,
	// Proxy-Authorization and Cookie.
	secretHeaders []string
	// heldAfter is the age at which an open body is reported
	// (UnclosedBodyWarning); held lists the warnings armed.
	heldAfter time.Duration
	held      heldList
	// stacks: record where each request was made, and report bodies
	// garbage collected unclosed (CaptureStacks).
	stacks    bool
	max1xx    int64 // bound on the bytes of a request's 1xx responses
	recorders sync.Pool
}

// defaultMax1xx is net/http's default MaxResponseHeaderBytes, the bound on
// 1xx responses when the base is not an *http.Transport that sets one.
const defaultMax1xx = 10 << 20

// NewTransport returns a Transport that records the requests it sends
// through base. base may be any RoundTripper, http.DefaultTransport
// included: it is wrapped, never changed. It must not be nil.
func NewTransport(base http.RoundTripper, opts ...Option) (*Transport, error) {
	if isnil.Value(base) {
		return nil, errors.New("httptrace: nil base RoundTripper")
	}
	t := &Transport{base: base, max1xx: defaultMax1xx, heldAfter: time.Minute}
	if ht, ok := base.(*http.Transport); ok && ht.MaxResponseHeaderBytes > 0 {
		t.max1xx = ht.MaxResponseHeaderBytes
	}
	for _, o := range opts {
		if isnil.Value(o) {
			return nil, errors.New("httptrace: nil option")
		}
		if err := o.apply(t); err != nil {
			return nil, err
		}
	}
	t.setObservers()
	return t, nil
}

// Base returns the RoundTripper t wraps.
func (t *Transport) Base() http.RoundTripper {
	if t == nil {
		return nil
	}
	return t.base
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if t == nil {
		return
	}
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// requestContext is the context of a request traced with the recorder's
// own ClientTrace (the caller set none): a single value that net/http
// reads as carrying that ClientTrace, where stdtrace.WithClientTrace
// would allocate a layer, and, with hooks on DNS and connects, two layers
// and a net trace with two closures, five objects a request. A Transport
// whose base dials through a pool's wrapper (internal/hook) has no such
// hooks, and the wrapper reads the context as carrying the recorder.
// Otherwise net holds the recorder's ClientTrace as WithClientTrace left it
// over an empty context, made once per recorder: what a dial or a lookup
// asks of the request's context under net's own key, it answers. It is
// immutable and allocated per request (a recycled one could be read by
// net/http after the request ended, for instance when its readLoop cancels
// the request's child context).
type requestContext struct {
	context.Context
	trace *stdtrace.ClientTrace
	r     *recorder
	net   context.Context
}

// requestContextBody is a request's context and its response body wrapper,
// allocated together.
type requestContextBody struct {
	ctx  requestContext
	body body
}

// newRequestContextBody returns a request context carrying ct and r over
// ctx (see requestContext), and the body wrapper allocated with it.
func newRequestContextBody(ctx context.Context, ct *stdtrace.ClientTrace, r *recorder) (context.Context, *body) {
	rc := &requestContextBody{ctx: requestContext{Context: ctx, trace: ct, r: r, net: r.netContext(ct)}}
	return &rc.ctx, &rc.body
}

func (c *requestContext) Value(key any) any {
	if key == clientTraceKey {
		return c.trace
	}
	if c.net == nil {
		if key == hook.DialKey {
			return c.r
		}
	} else if v := c.net.Value(key); v != nil {
		// net's trace; no other key is stored there but
		// clientTraceKey's, answered above.
		return v
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

// TimelineID returns the id of r's timeline, for the dial wrapper of a pool
// (see internal/hook): it ties the connection it makes to the request that
// caused the dial (events of that timeline, such as the TLS handshake, then
// concern that connection).
func (r *recorder) TimelineID() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tl.ID
}

// DialTrace returns ctx with DNS and connect hooks that record into r's
// timeline, for the dial wrapper of a pool (see internal/hook).
func (r *recorder) DialTrace(ctx context.Context) context.Context {
	r.mu.Lock()
	if !r.tl.Finished && !r.gotConn {
		// The Transport dials for this request: it is connecting now,
		// even before the dialer reports DNS or connect events.
		r.phase = vocab.StageConnect
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
	switch {
	case t == nil:
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("httptrace: RoundTrip on a nil *Transport")
	case req == nil:
		return nil, errors.New("httptrace: nil request")
	}
	r := t.recorder()
	r.begin(req)
	ct := r.trace(req)
	var (
		ctx     context.Context
		wrapper *body // allocated with the context, when it can be
	)
	if t.bodyIdle == 0 && !t.stacks && clientTraceKey != nil &&
		stdtrace.ContextClientTrace(r.ctx) == nil {
		// The common case: one context value instead of up to five
		// objects (see requestContext). The body wrapper comes in the
		// same allocation.
		ctx, wrapper = newRequestContextBody(r.ctx, ct, r)
	} else {
		ctx, wrapper = t.requestContext(r, ct)
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil || resp == nil {
		return nil, r.failed(resp, err)
	}
	hasBody := resp.Body != nil && resp.StatusCode != http.StatusSwitchingProtocols
	r.roundTripDone(resp, nil, hasBody)
	resp.Request = req
	if !hasBody {
		r.noBody()
		return resp, nil
	}
	empty := resp.Body == http.NoBody
	b := wrapper
	if b == nil {
		b = new(body)
	}
	*b = body{rc: resp.Body, r: r, gen: r.gen}
	if t.stacks && !empty {
		// Reported if garbage collected unclosed. The argument holds
		// the recorder, not b: a recorder never points to its body
		// wrapper. Nor may the response the base keeps: net/http's read
		// loop holds the *Response it made while its body is open, so
		// the caller gets a copy, the only holder of b.
		b.cleanup = runtime.AddCleanup(b, bodyCollected, collectedBody{r: r, gen: r.gen})
		b.hasCleanup = true
		own := new(http.Response)
		*own = *resp
		resp = own
	}
	if empty {
		r.emptyBody()
	}
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
	case !r.tl.Composed && clientTraceKey != nil && !t.stacks:
		// As in RoundTrip's common case. (Not when unclosed bodies are
		// reported: net/http holds the context of a body left open, which
		// would keep a wrapper allocated with it reachable and its cleanup
		// from ever running.)
		return newRequestContextBody(ctx, ct, r)
	case !r.tl.Composed && clientTraceKey != nil:
		return &requestContext{Context: ctx, trace: ct, r: r, net: r.netContext(ct)}, nil
	case t.dialHooks:
		ctx = stdtrace.WithClientTrace(ctx, ct)
		return context.WithValue(ctx, hook.DialKey, r), nil
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
	r.roundTripDone(nil, err, false)
	return err
}

// noBody ends a request whose response has no body to wait for (or whose
// connection was handed over to the caller, 101 Switching Protocols).
func (r *recorder) noBody() {
	r.mu.Lock()
	r.finishLocked(vocab.ClassOK, vocab.StageBody, nil, 0)
	r.disarmHeldLocked()
	r.mu.Unlock()
}

// collectedBody is the argument of the cleanup of a body wrapper: the
// request's recorder and generation.
type collectedBody struct {
	r   *recorder
	gen uint64
}

// bodyCollected reports a body garbage collected without Close. It runs on
// the runtime's cleanup goroutine.
func bodyCollected(c collectedBody) {
	c.r.bodyGone(c.gen)
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
	reuse, cancel := b.r.bodyClose(b.gen)
	err := b.rc.Close()
	if cancel != nil {
		cancel(nil)
	}
	if reuse {
		r := b.r
		r.reset()
		r.t.recorders.Put(r)
	}
	return err
}
