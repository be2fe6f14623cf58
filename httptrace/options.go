package httptrace

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/isnil"
)

// Option configures a [Transport]. Options are applied in order; an option
// whose value makes no sense is an error from [NewTransport].
type Option interface {
	apply(*Transport) error
}

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithObserver adds o to the observers of finished timelines: each
// WithObserver adds one, and they are called in the order given, as
// [Multi] calls them. An observer that is also an [EventObserver] receives
// every event as it is recorded. A nil observer (or a nil pointer in one)
// is an error.
func WithObserver(o Observer) Option {
	return optionFunc(func(t *Transport) error {
		if isnil.Value(o) {
			return errors.New("httptrace: WithObserver: nil observer")
		}
		t.observers = append(t.observers, o)
		return nil
	})
}

// setObservers sets t's observer and event observer from the observers
// the options added.
func (t *Transport) setObservers() {
	t.obs, t.events, t.kinds, t.kindEvents = nil, nil, 0, nil
	switch len(t.observers) {
	case 0:
		return
	case 1:
		t.obs = t.observers[0]
	default:
		t.obs = Multi(t.observers...)
	}
	t.events, _ = t.obs.(EventObserver)
	if m, ok := t.obs.(multi); ok && len(m.events) == 1 {
		// Events go straight to the one observer that wants them:
		// each would otherwise pay a call to the combination's loop.
		// (With none, the combination wants no kind of event.)
		t.events = m.events[0]
	}
	if t.events != nil {
		t.kinds = eventKinds(t.events)
		t.kindEvents, _ = t.events.(hook.KindObserver[*Timeline, *Event])
	}
}

// BodyIdleTimeout bounds the time the response body may make no progress:
// when no byte arrives for d (counted from the response headers, and again
// from each read that returned data), the request's context is cancelled
// with cause [ErrBodyIdleTimeout] and the next Read fails. It is a
// per-request watchdog, not a read deadline on the connection (which would
// also hit idle connections) and not a total deadline: a body that trickles
// slowly but steadily is not cut. A caller that stops reading also stops
// progress. No http.Transport field bounds this stage. Zero (the default)
// disables it.
func BodyIdleTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d < 0 {
			return fmt.Errorf("httptrace: BodyIdleTimeout %v is negative", d)
		}
		t.bodyIdle = d
		return nil
	})
}

// Headers records the values of the named request headers in
// [Timeline.Header]. Authorization, Proxy-Authorization, Cookie, Set-Cookie
// and the [SecretHeaders] are recorded masked whatever is asked.
func Headers(names ...string) Option {
	return optionFunc(func(t *Transport) error {
		return addHeaderNames(&t.headers, names)
	})
}

// SecretHeaders declares the named request headers secret, as
// Authorization, Proxy-Authorization and Cookie always are, whatever the
// letter case of the names: their values are masked in the error texts of
// every output (a server may quote what it was sent in a malformed reply,
// which net/http's error then quotes) and in the headers recorded with
// [Headers].
func SecretHeaders(names ...string) Option {
	return optionFunc(func(t *Transport) error {
		return addHeaderNames(&t.secretHeaders, names)
	})
}

// addHeaderNames appends names to *to as canonical keys; an empty name is
// an error.
func addHeaderNames(to *[]string, names []string) error {
	for _, n := range names {
		if n == "" {
			return errors.New("httptrace: empty header name (Headers, SecretHeaders)")
		}
		*to = append(*to, textproto.CanonicalMIMEHeaderKey(n))
	}
	return nil
}

// CaptureStacks turns on the diagnosis of response bodies left unclosed: it
// records where each request was made (the caller's stack outside net/http
// and connaudit, [Timeline.Stack]), so that a body left open is reported
// with where it was opened, and reports a body garbage collected without
// Close to the [EventObserver] as a "body-collected" event, which the
// [NewSlogObserver] logger writes as a warning (the connection such a body
// pinned stays pinned). It costs a stack walk and a cleanup registration
// per request (about half a microsecond and three allocations for a
// shallow stack, more for a deep one: bench/RESULTS.md), and formatting the
// stack where it is shown.
func CaptureStacks() Option {
	return optionFunc(func(t *Transport) error {
		t.stacks = true
		return nil
	})
}

// UnclosedBodyWarning reports a response body still open d after its
// response arrived: an [EventObserver] receives a "body-held" event, which
// the [NewSlogObserver] logger writes as a warning naming the request, its
// connection and, with [CaptureStacks], where it was made. Bodies left open
// one after the other are reported in that order. A request sets when its
// body falls due and takes no lock nor timer of the Transport's: each
// recycled recorder arms its timer at most once per d (no allocation). A
// stream meant to stay open longer wants a larger d. Zero turns it off;
// the default is one minute.
func UnclosedBodyWarning(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if d < 0 {
			return fmt.Errorf("httptrace: UnclosedBodyWarning %v is negative", d)
		}
		t.heldAfter = d
		return nil
	})
}

func init() {
	// A pool's dialer calls DialTrace itself (see internal/hook): the
	// requests' own traces then carry no DNS or connect hooks.
	hook.EnableDialerHooks = func(rt http.RoundTripper) { rt.(*Transport).dialHooks = true }
	hook.Settings = func(rt http.RoundTripper) hook.TraceSettings {
		t := rt.(*Transport)
		return hook.TraceSettings{BodyIdle: t.bodyIdle, Stacks: t.stacks, HeldAfter: t.heldAfter}
	}
	hook.Emit = func(rt http.RoundTripper, tl, ev any) {
		t, e := rt.(*Transport), ev.(Event)
		if t.kinds.Has(e.Kind) {
			t.events.ObserveEvent(tl.(*Timeline), e)
		}
	}
}
