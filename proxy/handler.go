package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
)

// errGuard is the cause of a request's context the guard ended.
var errGuard = errors.New("held past the guard")

// errFaulted ends a forwarded request whose response a fault drops.
var errFaulted = errors.New("dropped by a fault")

// capRead bounds what the proxy reads of a request it does not forward,
// to digest it: 1 MiB.
const capRead = 1 << 20

// exchange is one request as the proxy handles it; what its hooks record
// is guarded by its connection's lock or written by the handler's
// goroutine alone.
type exchange struct {
	a        Attempt
	rec      *connRec
	rule     *rule
	w        *statusWriter
	body     *digestBody
	method   string
	key      string // Idempotency-Key's value, for the match alone: never output
	answered bool   // the proxy answered in place of the upstream (502)
}

type exchangeKey struct{}

// serveHTTP handles one request of the connection r.
func (p *Proxy) serveHTTP(r *connRec, w http.ResponseWriter, req *http.Request) {
	client := p.clientName(req, r)
	nth, idle := r.begin(client)
	p.requests.Add(1)
	p.version.Add(1) // the live line's; no waiter waits for a start
	x := &exchange{rec: r, method: req.Method, key: req.Header.Get("Idempotency-Key"),
		w: &statusWriter{ResponseWriter: w}}
	x.a = Attempt{ID: p.nextReq.Add(1), Client: client, Conn: r.id, Nth: nth, Method: redact.Printable(req.Method),
		Path: redact.URL(req.URL), Start: time.Now(), Idle: idle, IdempotencyKey: x.key != ""}
	if req.ProtoMajor == 2 {
		r.setProto("h2")
	} else if req.Close {
		r.askClose()
	}
	x.body = &digestBody{r: req.Body, whole: !idempotent(req.Method)}
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = x.body
	}
	defer func() {
		r.end()
		p.finish(client, x)
	}()
	facts := reqFacts{nth: nth, idle: idle, method: req.Method, path: req.URL.Path, h2: req.ProtoMajor == 2}
	for _, rl := range p.reqRules {
		if rl.matches(facts) {
			x.rule = rl
			x.a.Fault = rl.name()
			r.addFault(rl.name())
			break
		}
	}
	ctx := context.WithValue(req.Context(), exchangeKey{}, x)
	if p.cfg.guard > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, p.cfg.guard, errGuard)
		defer cancel()
	}
	if rl := x.rule; rl != nil {
		switch {
		case rl.action == actStatus:
			x.readBody(ctx)
			x.a.Upstream = upstreamNotSent
			x.w.WriteHeader(rl.status)
			_, _ = io.WriteString(x.w, "connaudit proxy: fault "+rl.name()+"\n")
			x.a.Outcome = outcomeStatus
			return
		case (rl.action == actReset || rl.action == actClose) && !rl.after:
			x.readBody(ctx)
			x.a.Upstream = upstreamNotSent
			x.a.Outcome = outcomeFault
			r.kill(rl.action == actReset, reasonFault, rl.name())
			panic(http.ErrAbortHandler)
		case rl.action == actGoAway:
			r.goAway()
		}
	}
	defer func() {
		if v := recover(); v != nil {
			x.aborted(ctx)
			panic(v)
		}
	}()
	p.rp.ServeHTTP(x.w, req.WithContext(ctx))
	if context.Cause(ctx) == errGuard {
		x.aborted(ctx)
		panic(http.ErrAbortHandler)
	}
	if x.a.Outcome == "" {
		x.a.Outcome = outcomeStatus
	}
}

// aborted records a request the handler gave up: the guard's cut, or the
// client gone, or the upstream's response broken off.
func (x *exchange) aborted(ctx context.Context) {
	switch {
	case context.Cause(ctx) == errGuard:
		x.a.Outcome = outcomeUnbounded
		x.rec.kill(false, reasonGuard, "")
	case x.a.Outcome == outcomeFault:
	case ctx.Err() != nil || x.rec.clientEnded():
		x.a.Outcome = outcomeClientGone
	default:
		x.a.Outcome = outcomeUpstreamError
		x.rec.proxyClosing(reasonUpstream, "")
	}
}

// readBody reads, to digest, up to capRead of a request not forwarded.
func (x *exchange) readBody(ctx context.Context) {
	if x.body.r == nil || x.body.r == http.NoBody {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, io.LimitReader(x.body, capRead))
	}()
	select {
	case <-done:
	case <-ctx.Done():
		x.body.r.Close()
		<-done
	}
}

// modifyResponse sees the upstream's response: the request was processed.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	x, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		return nil
	}
	x.a.Upstream = upstreamResponse
	x.a.UpstreamStatus = resp.StatusCode
	rl := x.rule
	if rl == nil {
		return nil
	}
	ctx := resp.Request.Context()
	switch rl.action {
	case actReset, actClose: // after-upstream: the response is read, then lost
		_, _ = io.Copy(io.Discard, &ctxReader{ctx: ctx, r: resp.Body})
		resp.Body.Close()
		x.a.Outcome = outcomeFault
		x.rec.kill(rl.action == actReset, reasonFault, rl.name())
		return errFaulted
	case actDelayHeaders:
		if !p.wait(ctx, rl.dur) {
			return context.Cause(ctx)
		}
	case actStallBody:
		resp.Body = &stallBody{r: resp.Body, left: rl.bytes, x: x, p: p, ctx: ctx}
	}
	return nil
}

// upstreamError answers a request the upstream did not: 502, unless the
// request is to be dropped.
func (p *Proxy) upstreamError(w http.ResponseWriter, req *http.Request, err error) {
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if x.a.Upstream == "" {
		x.a.Upstream = upstreamError
		x.a.Error = p.redactError(err, req)
	}
	if errors.Is(err, errFaulted) || req.Context().Err() != nil {
		panic(http.ErrAbortHandler)
	}
	x.answered = true
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, "connaudit proxy: upstream: "+x.a.Error+"\n")
}

// buffers are ReverseProxy's copy buffers, reused: 32 KiB each, which
// it would otherwise allocate for every response.
type buffers struct{ pool sync.Pool }

func (b *buffers) Get() []byte {
	if v, ok := b.pool.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *buffers) Put(buf []byte) { b.pool.Put(&buf) }

// redactError returns err's text with the secrets of req masked: its
// URL's (the upstream's query merged into the client's), its credential
// headers' and those of each header named for a secret, in each form a
// server may echo them in and net/http's error quote them; then the
// upstream URL's, which a request the proxy did not forward lacks.
func (p *Proxy) redactError(err error, req *http.Request) string {
	var names []string
	for k := range req.Header {
		if redact.SecretHeader(k) {
			names = append(names, k)
		}
	}
	s := redact.Mask(err.Error(), req.URL, redact.RequestSecrets(req, names))
	return redact.Printable(redact.Mask(s, p.upstream, nil))
}

// statusWriter records the status and bytes of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// digestPrefix bounds what is digested of an idempotent request's body:
// its first 64 KiB, and its length. An idempotent request is judged only
// for a hidden retry, never for a write committed twice.
const digestPrefix = 64 << 10

// digestBody digests a request body as it streams through: the whole body
// of a request that is not idempotent (a write committed twice is judged
// by it), the first digestPrefix bytes and the length of any other. The
// hash is made at the first byte read.
type digestBody struct {
	r     io.ReadCloser
	h     hash.Hash
	n     int64
	whole bool // digest it all, not a prefix
	eof   bool // read to EOF
}

func (d *digestBody) Read(b []byte) (int, error) {
	n, err := d.r.Read(b)
	if n > 0 {
		if d.h == nil {
			d.h = sha256.New()
		}
		switch {
		case d.whole:
			d.h.Write(b[:n])
		case d.n < digestPrefix:
			d.h.Write(b[:min(int64(n), digestPrefix-d.n)])
		}
	}
	d.n += int64(n)
	if err == io.EOF {
		d.eof = true
	}
	return n, err
}

// digest is the first 16 hex digits of the body's digest, with its
// length when only a prefix was digested; "" for no body. A body not read
// to its end is marked "+".
func (d *digestBody) digest() string {
	if d.n == 0 && !d.eof {
		return ""
	}
	var sum [sha256.Size]byte
	if d.h != nil {
		d.h.Sum(sum[:0])
	} else {
		sum = sha256.Sum256(nil)
	}
	s := hex.EncodeToString(sum[:8])
	if !d.whole && d.n > digestPrefix {
		s += "/" + strconv.FormatInt(d.n, 10)
	}
	if !d.eof {
		s += "+" // partial
	}
	return s
}

func (d *digestBody) Close() error { return d.r.Close() }

// stallBody passes a response body's first bytes, then stalls until the
// request ends.
type stallBody struct {
	r    io.ReadCloser
	left int64
	x    *exchange
	p    *Proxy
	ctx  context.Context
}

func (s *stallBody) Read(b []byte) (int, error) {
	if s.left <= 0 {
		_ = http.NewResponseController(s.x.w).Flush()
		s.p.wait(s.ctx, time.Duration(1<<62))
		if err := context.Cause(s.ctx); err != nil {
			return 0, err
		}
		return 0, net.ErrClosed // the proxy stopped

	}
	if int64(len(b)) > s.left {
		b = b[:s.left]
	}
	n, err := s.r.Read(b)
	s.left -= int64(n)
	return n, err
}

func (s *stallBody) Close() error { return s.r.Close() }

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
