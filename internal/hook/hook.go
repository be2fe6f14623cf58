// Package hook joins the module's packages where they meet below their
// public API: the tracer and the pool's dialer, the tracer and the retry
// policy's attempt numbers, the tracer and observers that want some kinds
// of events only.
package hook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
)

// Filter is implemented by an event observer that wants events of some
// kinds only: the tracer calls it for those kinds alone.
type Filter interface {
	EventKinds() vocab.KindSet
}

// KindObserver is implemented by an event observer (of the tracer's
// timelines TL and events EV) that takes each event with its kind's bit
// (vocab.Bit), which the tracer knows where it records the event: the
// observer need not find the kind from its name, a string.
type KindObserver[TL, EV any] interface {
	ObserveKind(tl TL, ev EV, bit vocab.KindSet)
}

// Dial is what the context of a traced request offers the dial wrapper of
// a pool: the request's timeline id, and DNS and connect hooks that record
// into that timeline.
type Dial interface {
	TimelineID() uint64
	DialTrace(ctx context.Context) context.Context
}

type dialKey struct{}

// DialKey is the context key under which the tracer stores a [Dial].
var DialKey any = dialKey{}

// DialFrom returns the [Dial] of the request on whose behalf net/http
// dials with ctx, or nil.
func DialFrom(ctx context.Context) Dial {
	d, _ := ctx.Value(DialKey).(Dial)
	return d
}

// EnableDialerHooks, set by package httptrace, declares that the base
// transport of rt (an *httptrace.Transport, not yet in use) dials through a
// wrapper that calls [Dial.DialTrace], so the request's own trace carries no
// DNS or connect hooks.
var EnableDialerHooks func(rt http.RoundTripper)

// Stack, set by package httptrace, returns the program counters of where
// the request of tl (an *httptrace.Timeline) was made, with CaptureStacks:
// the pool keeps them for a body left open and formats them only when it
// is shown.
var Stack func(tl any) []uintptr

// URL, set by package httptrace, returns the URL of the request of tl (an
// *httptrace.Timeline) as the caller gave it, not copied, or nil: the
// caller may not change it until the request ends, and the pool reads it
// until then.
var URL func(tl any) *url.URL

// Slot, set by package httptrace, returns the slot of tl (an
// *httptrace.Timeline) where the event observer of the module's own (the
// pool) keeps its record of the request. The slot is read and written by
// that observer alone, while it is called with tl; it outlives the request
// when the tracer recycles tl's recorder for another request, so that the
// record serves request after request.
var Slot func(tl any) *any

// Context, set by package httptrace, returns the context of the request
// of tl (an *httptrace.Timeline) as the caller gave it, or nil for a
// clone: an observer of the module's own (the OpenTelemetry exporter)
// reads the caller's span there. It is valid while the observer is called
// with tl.
var Context func(tl any) context.Context

// FormatStack, set by package httptrace, formats pcs as Timeline.Stack
// does.
var FormatStack func(pcs []uintptr) string

type attemptKey struct{}

// attempted is set once [WithAttempt] was called in this process. Until
// then no context carries an attempt number, and [Attempt], which the
// tracer calls for every request, need not walk the request context's
// chain of parents (often many layers deep in a service) to find none.
var attempted atomic.Bool

// WithAttempt returns a copy of ctx that numbers the attempt of a request
// made with it (1, 2, …), so that each attempt's timeline carries its
// number.
func WithAttempt(ctx context.Context, n int) context.Context {
	if !attempted.Load() {
		attempted.Store(true)
	}
	return context.WithValue(ctx, attemptKey{}, n)
}

// Attempt returns the attempt number set by [WithAttempt], or 0.
func Attempt(ctx context.Context) int {
	if !attempted.Load() {
		return 0
	}
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// ConnAttempt is what a pool saw of the last request an HTTP/1 connection was
// handed: the evidence on which a request the Transport sent again
// elsewhere is judged processed or not by the server.
type ConnAttempt struct {
	// H2 is set on an HTTP/2 connection, of which the rest says nothing.
	H2 bool
	// Wrote is set when a byte of that request was written on it.
	Wrote bool
	// ServerClosed is set when the server closed the connection (an EOF
	// or a reset read); ClosedFirst when that came before any byte of the
	// request was written.
	ServerClosed, ClosedFirst bool
	// Idle is how long the connection had been idle when handed to the
	// request, 0 if it was not idle.
	Idle time.Duration
}

// LastAttempt, set by package pool, returns what the pool p (a
// *pool.Pool) saw of the last request handed its connection id, and false
// when it no longer knows the connection.
var LastAttempt func(p any, id uint64) (ConnAttempt, bool)

// PoolBounds are the bounds a pool adds to those of the transport it
// tracks.
type PoolBounds struct {
	// Connect is its ConnectTimeout (0: none), when ConnectSet.
	Connect    time.Duration
	ConnectSet bool
	// BodyIdle is its body-idle bound, 0 if none.
	BodyIdle time.Duration
}

// Bounds, set by package pool, returns the bounds the pool p (a
// *pool.Pool) adds to its transport's own.
var Bounds func(p any) PoolBounds

// TraceSettings are the settings of a tracer that a pool over it reads:
// they are declared and validated by package httptrace alone.
type TraceSettings struct {
	// BodyIdle is its BodyIdleTimeout, 0 if none.
	BodyIdle time.Duration
	// Stacks is set with CaptureStacks.
	Stacks bool
	// HeldAfter is its UnclosedBodyWarning, 0 if off.
	HeldAfter time.Duration
}

// Settings, set by package httptrace, returns the settings of rt (an
// *httptrace.Transport).
var Settings func(rt http.RoundTripper) TraceSettings

// Emit, set by package httptrace, hands ev (an httptrace.Event) to the
// event observers of rt (an *httptrace.Transport) that want its kind, with
// tl (an *httptrace.Timeline of rt's) as its timeline, without recording
// it there: it is an event of the pool's, not of that request's. It is
// called while an observer of rt is called with tl, so that tl is locked
// against its own events as every ObserveEvent call's is.
var Emit func(rt http.RoundTripper, tl, ev any)

// Churn is a pool's warning that it closes connections to a host for a
// full idle pool at a high rate, carried as the Err of an
// "idle-pool-churn" event: its Error says what was seen and what fixes it,
// and package httptrace's slog observer logs its fields.
type Churn struct {
	// Host is the host's address, host:port.
	Host string
	// Closes connections were closed for a full idle pool within the last
	// Requests requests to Host, over Span.
	Closes, Requests int
	Span             time.Duration
	// Setting is the cap that left no room, MaxIdleConnsPerHost or
	// MaxIdleConns, and Limit its value; InFlight is the most requests in
	// flight at once (to Host, or to all hosts for MaxIdleConns), each
	// needing a connection of its own, above it.
	Setting         string
	Limit, InFlight int
	// Fix says what to raise, and how.
	Fix string
}

// PerSecond returns the closes' rate over their span, 0 if none.
func (c *Churn) PerSecond() float64 {
	if c.Span <= 0 {
		return 0
	}
	return float64(c.Closes) / c.Span.Seconds()
}

func (c *Churn) Error() string {
	return fmt.Sprintf("%d connections to %s closed for a full idle pool within %d requests (%.1f/s): "+
		"%s (%d) keeps fewer idle connections than the %d requests in flight at once need, so the pool "+
		"closes connections it then dials again; %s",
		c.Closes, c.Host, c.Requests, c.PerSecond(), c.Setting, c.Limit, c.InFlight, c.Fix)
}

// DialFunc is the type of http.Transport's DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// TrackChain, set by package pool, returns a pool (a *pool.Pool) whose
// requests go through top, a RoundTripper of the caller's, with opts (its
// []pool.Option). inner is the *http.Transport top sends its requests
// through, found in it, or nil: the pool tracks it in place (the caller
// hands it over unused), as Track tracks a clone. Without inner the pool
// tracks no connection unless its dials go through [TrackDial], which dials
// says top's will.
var TrackChain func(top http.RoundTripper, inner *http.Transport, dials bool, opts any) (any, error)

// TrackDial, set by package pool, returns dial wrapped so that the pool p
// (a *pool.Pool made by [TrackChain] without an inner transport) tracks
// each connection it returns, a TLS connection whose handshake is done,
// with p's ConnectTimeout, if any, around it.
var TrackDial func(p any, dial DialFunc) DialFunc
