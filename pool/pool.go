package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/defaults"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/notify"
)

// Pool is a tracked HTTP connection pool: an [http.Transport] whose
// connections and requests are followed from dial to close. It is safe for
// concurrent use.
type Pool struct {
	tr *http.Transport
	// top, when set, is the caller's RoundTripper the tracer sends
	// requests through ([hook.TrackChain]); tr is then the transport
	// inside it, or a placeholder of the pool's that carries no request.
	top     http.RoundTripper
	traced  *httptrace.Transport
	rt      *roundTripper
	client  *http.Client
	cfg     config
	maxConn int
	// settings are the caps and bounds in force, as the debug page
	// shows them; never changed once built.
	settings *Settings
	stacks   bool // the tracer captures stacks (CaptureStacks)

	// shut is set by Close: the pool refuses new requests.
	shut atomic.Bool

	mu           sync.Mutex
	nextConn     uint64
	conns        map[uint64]*connState // open and dialing
	lastConn     *connState            // the last of conns looked up (see connLocked)
	closed       []*connState          // most recent closed, up to keepClosed (a ring)
	oldestClosed int                   // the index of the oldest of closed, once full
	hosts        map[string]*counters
	lastHost     hostCache           // the host of the last request started
	peaks        peaks               // the pool's peaks; its other totals are its hosts' sums
	reqs         reqSet              // requests not yet finished
	pendingTLS   map[uint64]*tlsWait // by the timeline id of the request whose dials they are
	closingIdle  int
	// closeIdle mirrors net/http's Transport.closeIdle: set by
	// CloseIdleConnections, cleared when a request next asks for a
	// connection. While it is set, the Transport closes a connection it
	// would have kept idle.
	closeIdle bool
	changes   notify.Changes // signalled at every change of state
	// opened holds the snapshots of connections opened, for the
	// OnConnOpen hook, until deliverOpened hands them over with the lock
	// released; hasOpened says it is not empty.
	opened    []Conn
	hasOpened atomic.Bool
	// churnNote is the churn warning (churn.go) readied for the next event
	// observed, churnPending says so; churnWarned that it was readied once.
	churnNote    *hook.Churn
	churnPending atomic.Bool
	churnWarned  bool
}

// deliverOpened hands the connections opened to the OnConnOpen hook; the
// pool's lock must not be held.
func (p *Pool) deliverOpened() {
	if !p.hasOpened.Load() {
		return
	}
	p.mu.Lock()
	opened := p.opened
	p.opened = nil
	p.hasOpened.Store(false)
	p.mu.Unlock()
	for _, c := range opened {
		p.cfg.onConnOpen(c)
	}
}

// New returns a pool for a service: a fresh http.Transport with
// http.DefaultTransport's settings (a proxy from the environment, dials
// bounded by 30s with 30s TCP keep-alives, TLS handshakes by 10s, idle
// connections kept 90s and at most 100 in all, a second to wait for
// "100 Continue", HTTP/2 attempted, no cap on the connections per host),
// with response headers bounded by 1 MiB (net/http's default is 10 MiB: a
// reply with more is treated as hostile and fails, class "protocol"),
// changed by opts. http.DefaultTransport
// itself is never touched. To keep a transport of your own as it is, use
// [Track].
func New(opts ...Option) (*Pool, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	dialer := defaults.Dialer()
	tr := defaults.Transport(dialer)
	tr.DialContext = nil // build wraps dialer's
	return build(tr, dialer.DialContext, cfg, dialer, nil, true)
}

// Track returns a pool that audits a clone of base: base's settings are
// never changed (and http.DefaultTransport never touched), with one caveat
// of net/http's: [http.Transport.Clone] runs base's one-time HTTP/2 set-up,
// as base's first request would, which may fill in base's nil
// TLSClientConfig and TLSNextProto. The clone keeps base's
// settings, including its timeouts or their absence, except where an option
// overrides them; its dialer is wrapped to track connections.
func Track(base *http.Transport, opts ...Option) (*Pool, error) {
	if base == nil {
		return nil, errors.New("pool: nil transport to track")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	tr := base.Clone()
	dial, dialer := dialOf(tr)
	return build(tr, dial, cfg, dialer, nil, true)
}

// dialOf returns the dial function of tr for the pool to wrap, and the
// net.Dialer it belongs to (nil: the caller's own function), and clears
// tr's deprecated Dial, which the wrapped DialContext replaces.
func dialOf(tr *http.Transport) (dialFunc, *net.Dialer) {
	dial := tr.DialContext
	var dialer *net.Dialer
	if dial == nil {
		//lint:ignore SA1019 honour the deprecated field if that is what the caller set
		if d := tr.Dial; d != nil {
			dial = func(_ context.Context, network, addr string) (net.Conn, error) { return d(network, addr) }
		} else {
			dialer = &net.Dialer{}
			dial = dialer.DialContext
		}
	}
	//lint:ignore SA1019 the wrapped DialContext replaces it
	tr.Dial = nil
	return dial, dialer
}

func configure(opts []Option) (config, error) {
	cfg := config{keepClosed: 256}
	for _, o := range opts {
		if o == nil {
			return cfg, errors.New("pool: nil option")
		}
		if err := o.apply(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// build returns a pool over tr, whose dials dial makes (dialer's, if
// not nil). Its requests go through top when it is not nil: a RoundTripper
// of the caller's that sends them through tr, or, when dial is nil, one
// whose connections the pool sees only through [Pool.trackDial]. tracked
// says that the pool's dialer makes the dials (dial, or trackDial's), so
// that the DNS and connect hooks are the dialer's.
func build(tr *http.Transport, dial dialFunc, cfg config, dialer *net.Dialer, top http.RoundTripper, tracked bool) (*Pool, error) {
	dial = cfg.setTransport(tr, dial, dialer)
	p := &Pool{
		tr:         tr,
		top:        top,
		cfg:        cfg,
		maxConn:    tr.MaxConnsPerHost,
		conns:      map[uint64]*connState{},
		hosts:      map[string]*counters{},
		pendingTLS: map[uint64]*tlsWait{},
	}
	if dial != nil {
		tr.DialContext = p.dialer(dial, true)
		if tr.DialTLSContext != nil {
			tr.DialTLSContext = p.dialer(tr.DialTLSContext, false)
		}
	}
	var base http.RoundTripper = tr
	if top != nil {
		base = top
	}
	// The pool's own observer first: it has counted a request's event
	// before the caller's observers see it.
	topts := append([]httptrace.Option{httptrace.WithObserver(observer{p})}, cfg.trace...)
	traced, err := httptrace.NewTransport(base, topts...)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	p.stacks = hook.Settings(traced).Stacks
	p.settings = settingsOf(tr, dialer, cfg, traced)
	if tracked {
		hook.EnableDialerHooks(traced)
	}
	p.traced = traced
	p.rt = &roundTripper{p: p}
	p.client = &http.Client{Transport: p.rt}
	return p, nil
}

// roundTripper is the pool's RoundTripper: the tracer, with
// CloseIdleConnections marked so the pool can name that close reason.
type roundTripper struct{ p *Pool }

func (r *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.p.shut.Load() {
		return refuse(req, ErrClosed)
	}
	return r.p.traced.RoundTrip(req)
}

func (r *roundTripper) CloseIdleConnections() { r.p.CloseIdleConnections() }

// Client returns an http.Client whose requests go through the tracer and the
// tracked transport. It has no Timeout: bounds are the pool's options and the
// request contexts. A nil pool's client fails every request.
func (p *Pool) Client() *http.Client {
	if p == nil {
		return &http.Client{Transport: refusing{errNilPool}}
	}
	return p.client
}

// RoundTripper returns the traced RoundTripper behind [Pool.Client]. A nil
// pool's fails every request.
func (p *Pool) RoundTripper() http.RoundTripper {
	if p == nil {
		return refusing{errNilPool}
	}
	return p.rt
}

// Transport returns the tracked http.Transport itself (nil for a nil pool).
// Requests sent on it directly bypass the tracer (their connections are
// tracked but not their stages) and [Pool.Close]'s refusal.
func (p *Pool) Transport() *http.Transport {
	if p == nil {
		return nil
	}
	return p.tr
}

// MaxConnsPerHost returns the transport's cap.
func (p *Pool) MaxConnsPerHost() int {
	if p == nil {
		return 0
	}
	return p.maxConn
}

// CloseIdleConnections closes the idle connections; they are recorded as
// closed by the client with reason "close-idle-connections".
func (p *Pool) CloseIdleConnections() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closingIdle++
	p.closeIdle = true
	p.mu.Unlock()
	p.tr.CloseIdleConnections()
	if c, ok := p.top.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	p.mu.Lock()
	p.closingIdle--
	p.mu.Unlock()
}

// Close closes the idle connections, and the pool refuses the requests sent
// through it from then on with [ErrClosed]. Connections still in use stay
// open until their requests end, and are then closed; [Pool.Check] reports
// them meanwhile. Its statistics, connections, checks and page still
// describe what it did. Closing twice is harmless.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.shut.Store(true)
	p.CloseIdleConnections()
}
