package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/defaults"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Pool is a tracked HTTP connection pool: an [http.Transport] whose
// connections and requests are followed from dial to close. It is safe for
// concurrent use.
type Pool struct {
	tr      *http.Transport
	traced  *httptrace.Transport
	rt      *roundTripper
	client  *http.Client
	cfg     config
	maxConn int
	stacks  bool // the tracer captures stacks (CaptureStacks)

	// shut is set by Close: the pool refuses new requests.
	shut atomic.Bool

	mu           sync.Mutex
	nextConn     uint64
	conns        map[uint64]*connState // open and dialing
	lastConn     *connState            // the last of conns looked up (see connLocked)
	closed       []*connState          // most recent closed, up to keepClosed (a ring)
	oldestClosed int                   // the index of the oldest of closed, once full
	hosts        map[string]*counters
	lastHost     hostCache // the host of the last request started
	total        counters
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

// request is the pool's record of a request not yet finished.
type request struct {
	id     uint64
	method string
	// methodIndex is the index of method in methods.
	methodIndex uint8
	host        string
	hc          *counters // the counters of host
	conn        *connState
	getConnAt   time.Duration // the offset of the last GetConn in its timeline
	waiting     bool
	bodyOpen    bool
	openedAt    stamp
	stack       []uintptr // where it was made, with CaptureStacks
	collected   bool
	waited      bool   // it waited for a connection (counted in waitCount)
	reused      bool   // its latest attempt got a reused connection (counted in reused)
	servedBy    uint64 // the connection its latest attempt was counted on
	early       bool
	connClose   bool
	proto       string
	u           url.URL // unredacted: redact before any output
	class       httptrace.Class
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
	return build(tr, dialer.DialContext, cfg, dialer)
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
	return build(tr, dial, cfg, dialer)
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

func build(tr *http.Transport, dial func(context.Context, string, string) (net.Conn, error), cfg config, dialer *net.Dialer) (*Pool, error) {
	if cfg.maxConnsPerHost != nil {
		tr.MaxConnsPerHost = *cfg.maxConnsPerHost
	}
	if cfg.maxIdleConnsPerHost != nil {
		tr.MaxIdleConnsPerHost = *cfg.maxIdleConnsPerHost
	}
	if cfg.connectTimeout != nil {
		if dialer == nil {
			inner := dial
			d := *cfg.connectTimeout
			dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if d > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, d)
					defer cancel()
				}
				return inner(ctx, network, addr)
			}
		} else {
			dialer.Timeout = *cfg.connectTimeout
		}
	}
	if cfg.resolver != nil && dialer != nil {
		dialer.Resolver = cfg.resolver
	}
	if cfg.tlsHandshakeTimeout != nil {
		tr.TLSHandshakeTimeout = *cfg.tlsHandshakeTimeout
	}
	if cfg.responseHeader != nil {
		tr.ResponseHeaderTimeout = *cfg.responseHeader
	}
	if cfg.idleConnTimeout != nil {
		tr.IdleConnTimeout = *cfg.idleConnTimeout
	}
	if cfg.tlsConfig != nil {
		tr.TLSClientConfig = cfg.tlsConfig.Clone()
	}
	if cfg.disableKeepAlives != nil {
		tr.DisableKeepAlives = *cfg.disableKeepAlives
	}
	if pr := cfg.protocols; pr != nil {
		if pr.HTTP2() || pr.UnencryptedHTTP2() {
			enableHTTP2(tr)
		} else {
			disableHTTP2(tr)
		}
		tr.Protocols = new(http.Protocols)
		*tr.Protocols = *pr
	}
	p := &Pool{
		tr:         tr,
		cfg:        cfg,
		maxConn:    tr.MaxConnsPerHost,
		conns:      map[uint64]*connState{},
		hosts:      map[string]*counters{},
		pendingTLS: map[uint64]*tlsWait{},
	}
	tr.DialContext = p.dialer(dial, true)
	if tr.DialTLSContext != nil {
		tr.DialTLSContext = p.dialer(tr.DialTLSContext, false)
	}
	// The pool's own observer first: it has counted a request's event
	// before the caller's observers see it.
	topts := append([]httptrace.Option{httptrace.WithObserver(observer{p})}, cfg.trace...)
	traced, err := httptrace.NewTransport(tr, topts...)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	p.stacks = hook.Settings(traced).Stacks
	hook.EnableDialerHooks(traced)
	p.traced = traced
	p.rt = &roundTripper{p: p}
	p.client = &http.Client{Transport: p.rt}
	return p, nil
}

// enableHTTP2 turns HTTP/2 over TLS on for tr, a transport of the pool's
// own, even with a TLS configuration or dialer of the caller's, which turn
// net/http's automatic HTTP/2 off.
func enableHTTP2(tr *http.Transport) {
	tr.ForceAttemptHTTP2 = true
	if tr.Protocols != nil {
		pr := *tr.Protocols
		pr.SetHTTP2(true)
		tr.Protocols = &pr
	}
	if tr.TLSNextProto != nil && tr.TLSNextProto["h2"] == nil {
		// An empty map turns HTTP/2 off; nil lets net/http set it up.
		tr.TLSNextProto = nil
	}
}

// disableHTTP2 turns HTTP/2 off on tr, a transport of the pool's own. An
// empty TLSNextProto alone is not enough: a TLS config that still offers
// "h2" by ALPN (as the clone of a transport that attempted HTTP/2 does) lets
// the server choose HTTP/2, which the Transport then reads as HTTP/1.
func disableHTTP2(tr *http.Transport) {
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if tr.Protocols != nil {
		pr := *tr.Protocols
		pr.SetHTTP2(false)
		tr.Protocols = &pr
	}
	if c := tr.TLSClientConfig; c != nil && slices.Contains(c.NextProtos, "h2") {
		c = c.Clone() // shares NextProtos' array with the caller's config: copy it
		c.NextProtos = slices.DeleteFunc(slices.Clone(c.NextProtos), func(p string) bool { return p == "h2" })
		tr.TLSClientConfig = c
	}
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

// dialer wraps dial so that every connection is tracked. With
// tlsHandshake the Transport runs a TLS handshake after the dial for https
// requests (DialContext); without it the dial returns a finished TLS
// connection (DialTLSContext).
func (p *Pool) dialer(dial func(context.Context, string, string) (net.Conn, error), tlsHandshake bool) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var tlID uint64
		if d := hook.DialFrom(ctx); d != nil {
			tlID = d.TimelineID()
			ctx = d.DialTrace(ctx)
		}
		now := time.Now()
		p.mu.Lock()
		p.nextConn++
		h := p.hostLocked(addr)
		c := &connState{Conn: Conn{ID: p.nextConn, Host: addr, DialedAt: now, DialedFor: tlID}, io: new(connIO), hc: h}
		if r := p.reqs.get(tlID); r != nil {
			c.Scheme = r.u.Scheme
		}
		c.setState(vocab.StateDialing, stampOf(now))
		p.conns[c.ID] = c
		// Whether the Transport handshakes after this dial is known from
		// the request, looked up now: the request may be cancelled and
		// forgotten while the dial goes on in the background.
		handshake := tlsHandshake && p.httpsLocked(tlID)
		p.tally(h, func(n *counters) {
			n.dials++
			n.dialing++
		})
		p.changes.Signal()
		p.mu.Unlock()

		nc, err := dial(ctx, network, addr)

		now = time.Now()
		defer p.deliverOpened()
		p.mu.Lock()
		defer p.mu.Unlock()
		defer p.changes.Signal()
		p.tally(h, func(n *counters) { n.dialing-- })
		p.forgetConnLocked(c)
		if err != nil {
			if nc != nil {
				nc.Close()
			}
			c.DialError = err.Error()
			// The Transport dials under a context of its own, apart from
			// the request's: it ends only when the Transport abandons
			// the dial.
			c.Abandoned = ctx.Err() != nil
			c.setState(vocab.StateFailed, stampOf(now))
			p.tally(h, func(n *counters) { n.dialErrors++ })
			p.rememberLocked(c)
			return nil, err
		}
		c.Local, c.Remote = nc.LocalAddr().String(), nc.RemoteAddr().String()
		p.conns[c.ID] = c
		if handshake || (tlsHandshake && p.httpsLocked(tlID)) {
			// The Transport handshakes next; the connection opens when
			// that request's timeline reports the handshake done.
			c.setState(vocab.StateHandshake, stampOf(now))
			c.dialCtx = ctx
			c.tls = true
			p.waitTLSLocked(tlID, c)
			p.tally(h, func(n *counters) { n.dialing++ })
		} else {
			c.Proto = p.dialedProto(nc, tlsHandshake)
			p.openLocked(c, h, stampOf(now))
		}
		tc := &trackedConn{Conn: nc, p: p, c: c, io: c.io}
		if c.tls {
			tc.records = new(recordReader)
		}
		return tc, nil
	}
}

// httpsLocked reports whether the request of timeline id, if still known,
// is an https request.
func (p *Pool) httpsLocked(id uint64) bool {
	r := p.reqs.get(id)
	return r != nil && r.u.Scheme == "https"
}

// dialedProto returns the protocol a connection dialed and opened at once
// is for: with tlsHandshake, a TCP connection over which the Transport
// speaks HTTP/1.1 (unless it may speak HTTP/2 without TLS); else a
// connection DialTLSContext returned, its handshake done, over which it
// speaks what was negotiated. "" when not known before a response.
func (p *Pool) dialedProto(nc net.Conn, tlsHandshake bool) string {
	if tlsHandshake {
		if pr := p.tr.Protocols; pr != nil && pr.UnencryptedHTTP2() {
			return ""
		}
		return "HTTP/1.1"
	}
	if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return "h2"
		}
		return "HTTP/1.1"
	}
	return ""
}

// openLocked marks c open and idle, and counts how long it took to set up.
func (p *Pool) openLocked(c *connState, h *counters, now stamp) {
	c.setState(vocab.StateIdle, now)
	c.openedAt = now
	c.readAtOpen = c.io.read.Load()
	if c.Proto == "h2" {
		c.setH2()
	}
	setup := now.time().Sub(c.DialedAt)
	if p.cfg.onConnOpen != nil {
		p.opened = append(p.opened, c.snapshot())
		p.hasOpened.Store(true)
	}
	p.tally(h, func(n *counters) {
		n.setups.add(setup)
		n.open++
		n.idle++
		// A connection the Transport is closing no longer counts
		// against its cap, though its Close may not have come yet.
		n.maxOpen = max(n.maxOpen, n.open-n.doomed)
	})
}

// hostCache remembers the host key and counters of a request's scheme and
// Host, so that a run of requests to one host (the common case) does not
// parse and hash the host name for each.
type hostCache struct {
	scheme, host, key string
	hc                *counters
}

// requestHostLocked returns the host key ([hostKey]) and counters of a
// request to host over scheme.
func (p *Pool) requestHostLocked(scheme, host string) (string, *counters) {
	if c := &p.lastHost; c.hc != nil && c.host == host && c.scheme == scheme {
		return c.key, c.hc
	}
	key := hostKey(scheme, host)
	hc := p.hostLocked(key)
	p.lastHost = hostCache{scheme: scheme, host: host, key: key, hc: hc}
	return key, hc
}

func (p *Pool) hostLocked(addr string) *counters {
	h := p.hosts[addr]
	if h == nil {
		h = &counters{closedBy: map[CloseReason]int64{}}
		p.hosts[addr] = h
	}
	return h
}

// rememberLocked keeps c among the closed connections the pool remembers,
// in a ring of KeepClosed entries: once it is full, c takes the place of
// the oldest. (Their order does not matter: Conns sorts by id.)
func (p *Pool) rememberLocked(c *connState) {
	if p.cfg.keepClosed == 0 {
		return
	}
	if len(p.closed) < p.cfg.keepClosed {
		p.closed = append(p.closed, c)
		return
	}
	p.closed[p.oldestClosed] = c
	p.oldestClosed = (p.oldestClosed + 1) % len(p.closed)
}

// hostKey returns the address the Transport dials for a request to u's
// host: host:port with the scheme's default port.
func hostKey(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := 80
	if scheme == "https" {
		port = 443
	}
	return net.JoinHostPort(trimBrackets(host), strconv.Itoa(port))
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}
