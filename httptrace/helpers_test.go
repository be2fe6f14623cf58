package httptrace_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/testserver"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/connaudit/connaudit/httptrace"
)

// guard bounds every wait of a test. Reaching it is a failure (a hang), never
// a measurement: tests assert outcomes and counts, not durations.
const guard = 10 * time.Second

// short is the bound given to a client timeout that a test wants to fire.
const short = 100 * time.Millisecond

func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

var quietLog = log.New(io.Discard, "", 0)

// startServer starts an HTTP/1.1 loopback server closed when the test ends.
func startServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = quietLog
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// startTLSServer starts an HTTPS loopback server, speaking HTTP/2 when h2 is
// set, closed when the test ends.
func startTLSServer(t testing.TB, h http.Handler, h2 bool) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = quietLog
	s.EnableHTTP2 = h2
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// trust returns a client TLS config that trusts s's certificate only.
func trust(s *httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return &tls.Config{RootCAs: pool}
}

// dialCounter counts the connections a base transport dials and gives each
// an id the recorder can read (a ConnID method, as a pool's connections have).
type dialCounter struct {
	d     net.Dialer
	dials atomic.Int64
}

type idConn struct {
	net.Conn
	id uint64
}

func (c *idConn) ConnID() uint64 { return c.id }

func (dc *dialCounter) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := dc.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &idConn{Conn: c, id: uint64(dc.dials.Add(1))}, nil
}

// newBase returns a fresh transport whose idle connections are closed when
// the test ends.
func newBase(t testing.TB, tr *http.Transport) *http.Transport {
	t.Helper()
	if tr == nil {
		tr = &http.Transport{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// traced wraps base in a Transport whose timelines go to a Collector (and to
// extra observers, if any).
func traced(t testing.TB, base http.RoundTripper, extra []httptrace.Observer, opts ...httptrace.Option) (*httptrace.Transport, *httptrace.Collector) {
	t.Helper()
	c := &httptrace.Collector{}
	obs := httptrace.Observer(c)
	if len(extra) > 0 {
		obs = httptrace.Multi(append([]httptrace.Observer{c}, extra...)...)
	}
	tr, err := httptrace.NewTransport(base, append([]httptrace.Option{httptrace.WithObserver(obs)}, opts...)...)
	require.NoError(t, err)
	return tr, c
}

func newRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// fetch sends a GET through rt, reads the body to EOF and closes it.
func fetch(t testing.TB, rt http.RoundTripper, url string) []byte {
	t.Helper()
	resp, err := rt.RoundTrip(newRequest(t, guardCtx(t), http.MethodGet, url, nil))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return b
}

// waitTimelines waits for n finished timelines and returns them.
func waitTimelines(t testing.TB, c *httptrace.Collector, n int) []*httptrace.Timeline {
	t.Helper()
	require.NoError(t, c.WaitN(guardCtx(t), n), "waiting for %d timelines", n)
	return c.Timelines()
}

// only returns the one timeline collected.
func only(t testing.TB, c *httptrace.Collector) *httptrace.Timeline {
	t.Helper()
	tls := waitTimelines(t, c, 1)
	require.Len(t, tls, 1)
	return tls[0]
}

func kindsOf(tl *httptrace.Timeline) []string {
	var ks []string
	for _, e := range tl.Events {
		ks = append(ks, string(e.Kind))
	}
	return ks
}

// index returns the position of the first event of kind k with N == n (n < 0:
// any N), or -1.
func index(tl *httptrace.Timeline, k httptrace.Kind, n int64) int {
	for i, e := range tl.Events {
		if e.Kind == k && (n < 0 || e.N == n) {
			return i
		}
	}
	return -1
}

// requireCounts checks the number of events of each kind named in want.
func requireCounts(t testing.TB, tl *httptrace.Timeline, want map[httptrace.Kind]int) {
	t.Helper()
	for k, n := range want {
		require.Equal(t, n, tl.Count(k), "count of %s in %v", k, kindsOf(tl))
	}
}

// gate is a handler helper: the handler announces it was entered and then
// blocks until the client gives up or the test releases it (always before the
// server is closed, which waits for handlers).
type gate struct {
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	rel     sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.rel.Do(func() { close(g.release) }) }

// hold signals entry and blocks until the request's context ends or the
// gate opens.
func (g *gate) hold(r *http.Request) {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-r.Context().Done():
	case <-g.release:
	}
}

func waitFor(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// rawServer accepts TCP connections on loopback and hands each to serve on
// its own goroutine. Listener and connections are closed, and the
// goroutines waited for, when the test ends.
func rawServer(t testing.TB, serve func(net.Conn)) net.Listener {
	t.Helper()
	return testserver.Raw(t, serve)
}

// readRequestHead reads from c up to the end of an HTTP/1 request head.
func readRequestHead(c net.Conn) (string, error) {
	br := bufio.NewReader(c)
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			return head.String(), err
		}
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// signals is an EventObserver that closes a channel the first time a
// non-late event of a watched kind is recorded, for any request.
type signals struct {
	mu sync.Mutex
	ch map[httptrace.Kind]chan struct{}
}

func newSignals(kinds ...httptrace.Kind) *signals {
	s := &signals{ch: make(map[httptrace.Kind]chan struct{})}
	for _, k := range kinds {
		s.ch[k] = make(chan struct{})
	}
	return s
}

func (s *signals) Observe(*httptrace.Timeline) {}

func (s *signals) ObserveEvent(_ *httptrace.Timeline, ev httptrace.Event) {
	if ev.Late {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.ch[ev.Kind]; ok && c != nil {
		close(c)
		s.ch[ev.Kind] = nil
	}
}

// on returns the channel closed on the first event of kind k.
func (s *signals) on(k httptrace.Kind) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.ch[k]; c != nil {
		return c
	}
	c := make(chan struct{})
	close(c)
	return c
}

// dnsServer is a tiny DNS server on loopback UDP. It answers A queries for
// the names it knows, an empty answer for their other types, and NXDOMAIN
// for every other name. Nothing it is asked ever leaves the machine.
type dnsServer struct {
	pc      net.PacketConn
	answers map[string][]netip.Addr
	queries atomic.Int64
}

// startDNS starts a DNS server and returns a resolver that sends every query
// to it, whatever /etc/resolv.conf says.
func startDNS(t testing.TB, answers map[string][]netip.Addr) (*net.Resolver, *dnsServer) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &dnsServer{pc: pc, answers: answers}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.queries.Add(1)
			if msg, err := s.answer(buf[:n]); err == nil {
				pc.WriteTo(msg, addr)
			}
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	res := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", pc.LocalAddr().String())
		},
	}
	return res, s
}

func (s *dnsServer) answer(req []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	addrs, known := s.answers[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if q.Type == dnsmessage.TypeA && a.Is4() {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60}
			if err := b.AResource(rr, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// secretsIn returns the secrets that occur in s.
func secretsIn(s string, secrets ...string) []string {
	var found []string
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			found = append(found, sec)
		}
	}
	return found
}

// withDialerHooks sets tr up as a pool sets up its tracer (internal/hook):
// base dials through a wrapper that records DNS and connect events into the
// timeline of the request that caused the dial, and tr's requests carry no
// such hooks themselves. tr must not be in use yet.
func withDialerHooks(base *http.Transport, tr *httptrace.Transport) {
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dt := hook.DialFrom(ctx); dt != nil {
			ctx = dt.DialTrace(ctx)
		}
		return d.DialContext(ctx, network, addr)
	}
	hook.EnableDialerHooks(tr)
}

// timelineJSON is the part of a timeline's JSON form the tests read.
type timelineJSON struct {
	Outcome struct {
		Class httptrace.Class `json:"class"`
		Error string          `json:"error"`
	} `json:"outcome"`
	Timings struct {
		Total    int64 `json:"total_ns"`
		PoolWait int64 `json:"pool_wait_ns"`
		NewConn  bool  `json:"new_conn"`
	} `json:"timings"`
}

// jsonOf returns tl's JSON form, read back.
func jsonOf(t testing.TB, tl *httptrace.Timeline) timelineJSON {
	t.Helper()
	b, err := json.Marshal(tl)
	require.NoError(t, err)
	var j timelineJSON
	require.NoError(t, json.Unmarshal(b, &j))
	return j
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes (a logger's
// handler may write from the timer's goroutine and the cleanup's).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mustJSONLines returns a JSON Lines observer writing to w.
func mustJSONLines(t testing.TB, w io.Writer) *httptrace.JSONLines {
	t.Helper()
	j, err := httptrace.NewJSONLines(w)
	require.NoError(t, err)
	return j
}

// mustSlog returns a slog observer logging through logger at Info, and
// failures at Warn.
func mustSlog(t testing.TB, logger *slog.Logger) httptrace.EventObserver {
	t.Helper()
	o, err := httptrace.NewSlogObserver(logger, slog.LevelInfo, slog.LevelWarn)
	require.NoError(t, err)
	return o
}
