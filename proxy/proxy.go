package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/internal/defaults"
	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/pool"
)

// Proxy is a reverse proxy that audits the client under test against its
// real upstream: every downstream connection from accept to close, the
// upstream pool's connections, replays, and the faults its rules inject.
// Its methods are safe for concurrent use.
type Proxy struct {
	cfg      config
	bounds   Bounds // the downstream bounds in force
	upstream *url.URL
	up       *pool.Pool
	rp       *httputil.ReverseProxy
	tlsCfg   *tls.Config
	caPEM    []byte
	reqRules []*rule
	conRules []*rule
	start    time.Time

	ln        net.Listener
	addr      string
	done      chan struct{}
	closeOnce sync.Once
	serving   sync.WaitGroup

	nextConn atomic.Uint64
	nextReq  atomic.Uint64
	faults   atomic.Int64
	requests atomic.Int64
	version  atomic.Uint64 // counts changes, for the live line
	finished atomic.Int64  // requests finished

	mu      sync.Mutex
	conns   map[uint64]*connRec // open
	clients map[string]*clientRec
	order   []string // clients in the order first seen
	replays []Replay
	cut     []Attempt // requests the guard cut
	changes notify.Changes
}

// New returns a proxy to the upstream URL (http or https), not yet
// listening: see [Proxy.Start].
func New(upstream string, opts ...Option) (*Proxy, error) {
	u, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	p := &Proxy{
		cfg: cfg, bounds: cfg.boundsInForce(), upstream: u, done: make(chan struct{}),
		conns: map[uint64]*connRec{}, clients: map[string]*clientRec{},
	}
	for i, r := range cfg.rules {
		rl := newRule(r, i, cfg.seed)
		if r.action.connLevel() {
			p.conRules = append(p.conRules, rl)
		} else {
			p.reqRules = append(p.reqRules, rl)
		}
	}
	base := defaults.Transport(defaults.Dialer())
	base.Proxy = nil // the upstream named is the one dialed
	base.MaxIdleConnsPerHost = 256
	base.MaxIdleConns = 256
	if cfg.upstreamCA != nil {
		base.TLSClientConfig = &tls.Config{RootCAs: cfg.upstreamCA, MinVersion: tls.VersionTLS12}
	}
	p.up, err = pool.Track(base, append([]pool.Option{pool.KeepClosed(1024)}, cfg.poolOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host },
		Transport:      p.up.RoundTripper(),
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       log.New(io.Discard, "", 0),
		BufferPool:     &buffers{},
	}
	if cfg.tls {
		ca, err := loopback.NewCA("connaudit proxy", "connaudit proxy CA")
		if err != nil {
			p.up.Close()
			return nil, fmt.Errorf("proxy: %w", err)
		}
		cert, err := ca.Leaf("localhost", nil)
		if err != nil {
			p.up.Close()
			return nil, fmt.Errorf("proxy: %w", err)
		}
		p.caPEM = ca.PEM()
		p.tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	return p, nil
}

// parseUpstream checks the upstream's URL: an http or https URL with a
// host, and a port from 1 to 65535 if it names one. Its errors say why,
// with the URL's user information and query values masked.
func parseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URL whole, its secrets with it: say
		// what is wrong with it, with the URL as masked as can be
		// without parsing it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("proxy: upstream %s: not a URL: %s", maskRaw(raw),
			redact.Text(redact.Printable(redact.Mask(err.Error(), nil, rawSecrets(raw)))))
	}
	want := "want http://HOST[:PORT]/ or https://HOST[:PORT]/"
	switch {
	case u.Scheme == "":
		return nil, fmt.Errorf("proxy: upstream %q: no scheme: %s", maskRaw(raw), want)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("proxy: upstream %q: scheme %q is not http or https", maskRaw(raw), u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("proxy: upstream %q: no host: %s", maskRaw(raw), want)
	case u.User != nil:
		return nil, fmt.Errorf("proxy: upstream %s: user information in the URL is not forwarded; drop it", redact.URL(u))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("proxy: upstream %s: port %s is out of range (1 to 65535)", redact.URL(u), port)
		}
	}
	return u, nil
}

// maskRaw masks what may be user information or query values in a URL
// that is refused: what precedes its last "@" (after its scheme), and
// what follows its first "?".
func maskRaw(raw string) string {
	s, query, hasQuery := strings.Cut(raw, "?")
	if hasQuery && query != "" {
		query = redact.Masked
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	// Up to the last "@" of all it has before the query, not its
	// authority's alone: "http:///user:pw@host" has its user
	// information in its path.
	auth := s[start:]
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		s = s[:start] + redact.Masked + s[start+i:]
	}
	if hasQuery {
		s += "?" + query
	}
	return redact.Printable(s)
}

// rawSecrets are the values maskRaw masks, for an error that quotes part
// of them.
func rawSecrets(raw string) []redact.Secret {
	var out []redact.Secret
	s, query, _ := strings.Cut(raw, "?")
	if query != "" {
		out = append(out, redact.Secret{Value: query})
	}
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+len("://"):]
	}
	if i := strings.LastIndexByte(s, '@'); i > 0 {
		user, pw, _ := strings.Cut(s[:i], ":")
		for _, v := range []string{s[:i], user, pw} {
			if v != "" {
				out = append(out, redact.Secret{Value: v})
			}
		}
	}
	return out
}

// Start listens and serves until [Proxy.Close].
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", p.cfg.listen)
	if err != nil {
		p.up.Close()
		return fmt.Errorf("proxy: %w", err)
	}
	p.ln = listener{Listener: ln, p: p}
	p.addr = ln.Addr().String()
	p.start = time.Now()
	p.serving.Add(1)
	go p.acceptLoop()
	return nil
}

// URL returns the URL the client under test is pointed at.
func (p *Proxy) URL() string {
	if p.cfg.tls {
		return "https://" + p.addr
	}
	return "http://" + p.addr
}

// UpstreamPool returns the pool of the proxy's own connections to the
// upstream, for a program that embeds the proxy to export its numbers
// (promconnaudit's collector; otelconnaudit's Register, its observer
// given with [UpstreamPoolOptions]) or to serve its [pool.Pool.Handler]
// on a debug route. The proxy closes it at [Proxy.Close].
func (p *Proxy) UpstreamPool() *pool.Pool { return p.up }

// CA returns the PEM of the CA the proxy's certificate is signed by, for
// the client under test to trust; nil without [DownstreamTLS].
func (p *Proxy) CA() []byte { return p.caPEM }

// Close stops the proxy: it closes its listener and every connection,
// ends what each held, and closes the upstream pool. The report is final
// then.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		close(p.done)
		if p.ln != nil {
			p.ln.Close()
		}
		p.mu.Lock()
		open := make([]*connRec, 0, len(p.conns))
		for _, r := range p.conns {
			open = append(open, r)
		}
		p.mu.Unlock()
		for _, r := range open {
			r.kill(false, reasonShutdown, "")
			r.mu.Lock()
			srv := r.srv
			r.mu.Unlock()
			if srv != nil {
				srv.Close()
			}
		}
		p.serving.Wait()
		p.up.Close()
	})
	return nil
}

// acceptLoop serves each connection with an http.Server of its own, so
// that one connection can be sent a GOAWAY (its server's Shutdown).
func (p *Proxy) acceptLoop() {
	defer p.serving.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.serving.Add(1)
		go p.serveConn(c.(*conn))
	}
}

// accepted records a new downstream connection.
func (p *Proxy) accepted(c net.Conn) *conn {
	r := &connRec{p: p, raw: c, closed: make(chan struct{}), id: p.nextConn.Add(1),
		remote: c.RemoteAddr().String(), accepted: time.Now(), proto: "HTTP/1.1"}
	r.quiet = sync.NewCond(&r.mu)
	r.idleRule = p.pickConnRule()
	p.mu.Lock()
	refuse := ""
	select {
	case <-p.done:
		refuse = reasonShutdown
	default:
		if len(p.conns) >= p.bounds.Conns {
			// Past the cap: shed at once, as a server out of capacity
			// does; accounted for as the proxy's close all the same.
			refuse = reasonConnLimit
		}
	}
	if refuse != "" {
		p.mu.Unlock()
		c.Close()
		r.closedBy, r.reason, r.isClosed, r.closedAt = closedByProxy, refuse, true, time.Now()
		close(r.closed)
		return &conn{Conn: c, rec: r}
	}
	p.conns[r.id] = r
	p.mu.Unlock()
	r.mu.Lock()
	r.armIdleLocked()
	r.mu.Unlock()
	p.changed()
	return &conn{Conn: c, rec: r}
}

// serveConn serves one connection until it closes.
func (p *Proxy) serveConn(c *conn) {
	defer p.serving.Done()
	r := c.rec
	one := &oneConnListener{c: c, done: r.closed}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { p.serveHTTP(r, w, req) }),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: p.bounds.Header,
		IdleTimeout:       p.bounds.Idle,
		MaxHeaderBytes:    p.bounds.HeaderBytes,
	}
	var nc net.Conn = c
	if p.tlsCfg != nil {
		srv.TLSConfig = p.tlsCfg
		nc = tls.Server(c, p.tlsCfg)
		one.c = nc
	}
	r.mu.Lock()
	r.srv = srv
	closing := r.isClosed
	r.mu.Unlock()
	if closing {
		c.Close()
	}
	_ = srv.Serve(one)
	<-r.closed
	r.mu.Lock()
	for r.active > 0 {
		r.quiet.Wait()
	}
	r.mu.Unlock()
	p.addConn(r)
	p.changed()
}

// oneConnListener hands its one connection to an http.Server, then
// waits for it to close.
type oneConnListener struct {
	c    net.Conn
	done <-chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// pickConnRule returns the first connection rule that takes a new
// connection, or nil.
func (p *Proxy) pickConnRule() *rule {
	for _, rl := range p.conRules {
		if rl.take() {
			return rl
		}
	}
	return nil
}

// changed signals a change of the counts.
func (p *Proxy) changed() {
	p.version.Add(1)
	p.mu.Lock()
	p.changes.Signal()
	p.mu.Unlock()
}
func (p *Proxy) faulted() { p.faults.Add(1); p.changed() }

// wait waits d, or until ctx ends or the proxy closes; it says whether d
// passed.
func (p *Proxy) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.done:
	}
	return false
}
