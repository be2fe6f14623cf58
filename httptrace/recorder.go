package httptrace

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	stdtrace "net/http/httptrace"
	"net/textproto"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

const (
	inlineEvents = 24  // events stored without allocating
	maxEvents    = 256 // events stored at most; more are counted as Dropped
	// endEvents is the room kept, once the timeline is nearly full, for
	// the events that end a request (response, body EOF, body close,
	// done), each recorded at most once: a server that floods 1xx
	// responses, or a Transport that retries many times, must not push
	// the request's outcome out of its own timeline.
	endEvents = 4
)

var timelineIDs atomic.Uint64

// recorder records one request's timeline. Every method takes mu; hooks
// arrive from several goroutines and after the request finished.
type recorder struct {
	// buf holds a request's first events.
	buf [inlineEvents]Event

	mu  sync.Mutex
	gen uint64 // bumped on reuse; a body wrapper of an earlier request carries its own
	t   *Transport
	ctx context.Context // the caller's request context
	// req is the request, until it finished (it may be read, not
	// changed, until then); errs is set once an event carried an error.
	req  *http.Request
	errs bool

	tl Timeline

	// hooks is built once per recorder and never composed with another
	// trace, so it can serve request after request; bodiless is the same
	// for requests without a body (see wroteBodiless). Without a pool's
	// dialer, hooksNet and bodilessNet are each over an empty context
	// as stdtrace.WithClientTrace leaves it, made at first use (see
	// requestContext).
	hooks, bodiless       stdtrace.ClientTrace
	hooksNet, bodilessNet context.Context

	phase      Stage // the stage of the current connection acquisition
	connects   int   // connect attempts started and not yet done
	connectOK  bool  // a connect of this request succeeded
	netEvents  bool  // a DNS, connect or TLS event was seen
	gotIdle    int   // GotConn answers with WasIdle set
	gotConn    bool  // the current acquisition got its connection
	gotAny     bool  // a connection was handed over since the last counted acquisition
	wrote      bool
	firstByte  bool
	response   bool
	readErr    error
	roundTrips int
	size1xx    int64 // bytes of 1xx responses received, roughly

	// body idle watchdog
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	watchGen  uint64
	idleFired bool // the watchdog cancelled the request
	// lastConn is the connection of the last GotConn, kept across
	// requests with its id and addresses, which do not change: a recycled
	// recorder mostly serves its next request on the same connection, and
	// then reads none of them again. Only a connection of a comparable
	// type is kept (comparing one of another type would panic).
	lastConn              net.Conn
	lastID                uint64
	lastLocal, lastRemote net.Addr

	// held is the timer of the unclosed-body warning; heldArmed says it
	// is armed, and the recorder in its Transport's heldList, by weak, a
	// weak pointer to it. heldGen is the generation whose body the
	// warning is for, heldSet that it is set and not yet reported;
	// heldDue when it falls due, an offset of the timeline.
	held      *time.Timer
	heldArmed bool
	heldGen   uint64
	heldSet   bool
	heldDue   time.Duration
	weak      weak.Pointer[recorder]
	// respAt is the offset of the response (the end of RoundTrip).
	respAt time.Duration
	// pcs holds the stack where the request was made (CaptureStacks).
	pcs [maxStack]uintptr

	// idleBy is when the body counts as idle. The timer's callback checks
	// it: a callback that fired for an earlier request of this recycled
	// recorder, or before the last progress, and then waited on mu, finds
	// it in the future and does nothing.
	idleBy time.Time
}

func newRecorder(t *Transport) *recorder {
	r := &recorder{t: t}
	r.hooks = stdtrace.ClientTrace{
		GetConn:              r.getConn,
		GotConn:              r.gotConnHook,
		PutIdleConn:          r.putIdleConn,
		GotFirstResponseByte: r.gotFirstResponseByte,
		// No Got100Continue: both HTTP/1 and HTTP/2 also report a 100
		// Continue through Got1xxResponse, so hooking both recorded it twice.
		Got1xxResponse:    r.got1xxResponse,
		TLSHandshakeStart: r.tlsHandshakeStart,
		TLSHandshakeDone:  r.tlsHandshakeDone,
		WroteHeaders:      r.wroteHeaders,
		Wait100Continue:   r.wait100Continue,
		WroteRequest:      r.wroteRequest,
	}
	if !t.dialHooks {
		r.addNetHooks(&r.hooks)
	}
	r.bodiless = r.hooks
	r.bodiless.WroteHeaders = nil
	r.bodiless.WroteRequest = r.wroteBodiless
	return r
}

// trace returns the hooks for req.
func (r *recorder) trace(req *http.Request) *stdtrace.ClientTrace {
	if req.Body == nil || req.Body == http.NoBody {
		return &r.bodiless
	}
	return &r.hooks
}

// netContext returns the context that answers net's own trace key for ct,
// one of r's traces, or nil if r's hooks leave DNS and connects to a pool's
// dialer.
func (r *recorder) netContext(ct *stdtrace.ClientTrace) context.Context {
	if r.t.dialHooks {
		return nil
	}
	p := &r.hooksNet
	if ct == &r.bodiless {
		p = &r.bodilessNet
	}
	if *p == nil {
		*p = stdtrace.WithClientTrace(context.Background(), ct)
	}
	return *p
}

func (r *recorder) addNetHooks(ct *stdtrace.ClientTrace) {
	ct.DNSStart = r.dnsStart
	ct.DNSDone = r.dnsDone
	ct.ConnectStart = r.connectStart
	ct.ConnectDone = r.connectDone
}

// begin readies r for req.
func (r *recorder) begin(req *http.Request) {
	r.ctx = req.Context()
	r.req = req
	r.tl.ID = timelineIDs.Add(1)
	r.tl.Attempt = hook.Attempt(r.ctx)
	r.tl.Method = req.Method
	if r.tl.Method == "" {
		r.tl.Method = http.MethodGet
	}
	r.tl.url = req.URL
	r.tl.ctx = r.ctx
	r.tl.Host = req.Host
	if r.tl.Host == "" && req.URL != nil {
		r.tl.Host = req.URL.Host
	}
	r.tl.Events = r.buf[:0]
	if len(r.t.headers) > 0 {
		r.tl.Header = make(map[string]string, len(r.t.headers))
		for _, h := range r.t.headers {
			if v := req.Header.Values(h); len(v) > 0 {
				if slices.Contains(r.t.secretHeaders, h) {
					r.tl.Header[h] = redact.Masked
				} else {
					r.tl.Header[h] = redact.Header(h, v)
				}
			}
		}
	}
	r.roundTrips = 1
	if r.t.stacks {
		r.tl.stack = callers(r.pcs[:])
	}
	r.tl.Start = time.Now()
}

// reset clears r for its next request. Called with no hook able to fire.
func (r *recorder) reset() {
	r.mu.Lock()
	r.gen++
	// Clear only the events this request stored inline (they hold
	// strings and errors the GC must not keep alive): a 24-event clear
	// with write barriers on, per request, showed in profiles.
	clear(r.buf[:min(len(r.tl.Events), inlineEvents)])
	r.tl = Timeline{Events: r.buf[:0], slot: r.tl.slot}
	r.ctx, r.req, r.errs = nil, nil, false
	r.phase, r.connects, r.connectOK, r.netEvents = "", 0, false, false
	r.gotIdle, r.gotConn, r.gotAny, r.wrote, r.firstByte, r.response = 0, false, false, false, false, false
	r.readErr, r.roundTrips, r.size1xx = nil, 0, 0
	r.cancel, r.idleFired = nil, false
	r.mu.Unlock()
}

// mark records an event of kind k, whose bit is bit, with neither an
// address nor an error: the events of a request that goes well; r.mu is
// held. An event whose at is zero is timed now; one recorded in the same
// call as the event before it shares that event's time, which spares a
// clock read.
//
// It runs about ten times a request, each time after a stretch of
// net/http's own code, fetched anew: its arguments travel in registers,
// the event is written in place, what it does not run on the common path
// (a late event, a full timeline) is out of line, and the observer of the
// module's own takes the event stored, by pointer, not a copy.
func (r *recorder) mark(bit vocab.KindSet, k Kind, at time.Duration, conn uint64, n int64) {
	if at == 0 {
		at = time.Since(r.tl.Start)
	}
	i := len(r.tl.Events)
	if r.tl.Finished || i >= maxEvents-endEvents || i == cap(r.tl.Events) {
		r.markRare(bit, k, at, conn, n)
		return
	}
	// The slots past the timeline's end are zero (see reset; an append
	// that grows the slice zeroes its new room): only what is set is
	// written.
	r.tl.Events = r.tl.Events[:i+1]
	e := &r.tl.Events[i]
	e.Kind, e.At, e.Conn, e.N = k, at, conn, n
	if r.t.kinds&bit != 0 {
		r.observe(bit, e)
	}
}

// markRare is mark for an event that is late or finds the timeline full or
// out of room; r.mu is held.
//
//go:noinline
func (r *recorder) markRare(bit vocab.KindSet, k Kind, at time.Duration, conn uint64, n int64) {
	r.addRare(bit, Event{Kind: k, At: at, Conn: conn, N: n})
}

// add records e, whose kind's bit is bit, an event that may carry an
// address or an error; r.mu is held. See mark.
func (r *recorder) add(bit vocab.KindSet, e Event) {
	if e.At == 0 {
		e.At = time.Since(r.tl.Start)
	}
	r.addRare(bit, e)
}

// addRare is add for an event that is late, carries an error, or finds the
// timeline nearly full; r.mu is held.
//
//go:noinline
func (r *recorder) addRare(bit vocab.KindSet, e Event) {
	if r.tl.Finished {
		e.Late = true
	}
	if e.Err != nil {
		r.errs = true
	}
	if n := len(r.tl.Events); n < maxEvents-endEvents || (n < maxEvents && endsRequest(e.Kind)) {
		r.tl.Events = append(r.tl.Events, e)
	} else {
		r.tl.Dropped++
	}
	if r.t.kinds&bit != 0 {
		r.observe(bit, &e)
	}
}

// observe hands e, of the kind whose bit is bit, to the event observer;
// r.mu is held.
func (r *recorder) observe(bit vocab.KindSet, e *Event) {
	if k := r.t.kindEvents; k != nil {
		k.ObserveKind(&r.tl, e, bit)
	} else {
		r.t.events.ObserveEvent(&r.tl, *e)
	}
}

// endsRequest reports whether k is one of the endEvents kinds.
func endsRequest(k Kind) bool {
	return k == vocab.KindResponse || k == vocab.KindBodyEOF || k == vocab.KindBodyClose || k == vocab.KindDone
}

func (r *recorder) getConn(string) {
	r.mu.Lock()
	r.tl.GetConns++
	if r.gotAny && !r.tl.Finished {
		// A connection was handed to this request since the last
		// acquisition: the Transport is sending it again on another one.
		// (HTTP/2 asks twice for one new connection, with no GotConn in
		// between: that counts once.)
		r.tl.Retries++
		r.gotAny = false
	}
	r.phase = vocab.StagePoolWait
	r.gotConn, r.wrote, r.firstByte = false, false, false
	r.mark(vocab.BitGetConn, vocab.KindGetConn, 0, 0, 0)
	r.mu.Unlock()
}

func (r *recorder) gotConnHook(info stdtrace.GotConnInfo) {
	r.mu.Lock()
	id, local, remote := r.identify(info.Conn)
	if !r.tl.Finished {
		if info.WasIdle {
			r.gotIdle++
		}
		r.gotConn, r.gotAny = true, true
		r.phase = vocab.StageWrite
		r.tl.Conn = ConnInfo{
			ID:       id,
			Reused:   info.Reused,
			WasIdle:  info.WasIdle,
			IdleTime: info.IdleTime,
			Dialed:   r.connectOK && !info.WasIdle,
			Local:    local,
			Remote:   remote,
		}
	}
	n := int64(0)
	if info.Reused {
		n = 1
	}
	r.mark(vocab.BitGotConn, vocab.KindGotConn, 0, id, n)
	r.mu.Unlock()
}

// identify returns c's id ([ConnID]) and addresses; r.mu is held.
func (r *recorder) identify(c net.Conn) (id uint64, local, remote net.Addr) {
	if c == nil {
		return 0, nil, nil
	}
	if r.lastConn != nil && c == r.lastConn {
		return r.lastID, r.lastLocal, r.lastRemote
	}
	id, local, remote = connID(c), c.LocalAddr(), c.RemoteAddr()
	r.lastConn = nil
	if reflect.TypeOf(c).Comparable() {
		r.lastConn, r.lastID, r.lastLocal, r.lastRemote = c, id, local, remote
	}
	return id, local, remote
}

func (r *recorder) putIdleConn(err error) {
	r.mu.Lock()
	if err != nil {
		r.add(vocab.BitPutIdleConn, Event{Kind: vocab.KindPutIdleConn, Conn: r.tl.Conn.ID, Err: err})
	} else {
		r.mark(vocab.BitPutIdleConn, vocab.KindPutIdleConn, 0, r.tl.Conn.ID, 0)
	}
	r.mu.Unlock()
}

func (r *recorder) gotFirstResponseByte() {
	r.mu.Lock()
	r.firstByte = true
	r.mark(vocab.BitFirstByte, vocab.KindFirstByte, 0, r.tl.Conn.ID, 0)
	r.mu.Unlock()
}

// got1xxResponse records an informational response. net/http stops
// bounding the size of 1xx responses once a Got1xxResponse hook sees them
// (the hook's owner is then responsible), so the recorder bounds them
// itself, as net/http would without it: past the base Transport's
// MaxResponseHeaderBytes in all, the request fails ([Classify]: protocol).
func (r *recorder) got1xxResponse(code int, h textproto.MIMEHeader) error {
	size := int64(len("HTTP/1.1 100 Continue\r\n\r\n"))
	for k, vs := range h {
		for _, v := range vs {
			size += int64(len(k) + len(v) + len(": \r\n"))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.size1xx += size
	r.mark(vocab.BitGot1xx, vocab.KindGot1xx, 0, r.tl.Conn.ID, int64(code))
	if limit := r.t.max1xx; r.size1xx > limit {
		return fmt.Errorf("%w (%d bytes)", vocab.ErrTooMany1xx, limit)
	}
	return nil
}

func (r *recorder) dnsStart(info stdtrace.DNSStartInfo) {
	r.mu.Lock()
	r.netEvents = true
	if !r.tl.Finished {
		r.phase = vocab.StageDNS
		r.tl.DNS.Host = info.Host
	}
	r.add(vocab.BitDNSStart, Event{Kind: vocab.KindDNSStart, Addr: info.Host})
	r.mu.Unlock()
}

func (r *recorder) dnsDone(info stdtrace.DNSDoneInfo) {
	r.mu.Lock()
	r.netEvents = true
	if !r.tl.Finished {
		r.tl.DNS.Addrs, r.tl.DNS.Err = info.Addrs, info.Err
	}
	r.add(vocab.BitDNSDone, Event{Kind: vocab.KindDNSDone, N: int64(len(info.Addrs)), Err: info.Err})
	r.mu.Unlock()
}

func (r *recorder) connectStart(_, addr string) {
	r.mu.Lock()
	r.netEvents = true
	r.connects++
	if !r.tl.Finished && !r.gotConn {
		r.phase = vocab.StageConnect
	}
	r.add(vocab.BitConnectStart, Event{Kind: vocab.KindConnectStart, Addr: addr})
	r.mu.Unlock()
}

func (r *recorder) connectDone(_, addr string, err error) {
	r.mu.Lock()
	r.netEvents = true
	r.connects--
	if err == nil && !r.tl.Finished {
		r.connectOK = true
		if !r.gotConn && r.tl.url != nil && r.tl.url.Scheme == "https" {
			// TCP is up; for https the TLS handshake comes next.
			r.phase = vocab.StageTLS
		}
	}
	r.add(vocab.BitConnectDone, Event{Kind: vocab.KindConnectDone, Addr: addr, Err: err})
	r.mu.Unlock()
}

func (r *recorder) tlsHandshakeStart() {
	r.mu.Lock()
	r.netEvents = true
	if !r.tl.Finished && !r.gotConn {
		r.phase = vocab.StageTLS
	}
	r.mark(vocab.BitTLSStart, vocab.KindTLSStart, 0, 0, 0)
	r.mu.Unlock()
}

func (r *recorder) tlsHandshakeDone(st tls.ConnectionState, err error) {
	r.mu.Lock()
	r.netEvents = true
	if !r.tl.Finished {
		r.tl.TLS = TLSInfo{
			Done:        true,
			Version:     st.Version,
			CipherSuite: st.CipherSuite,
			ALPN:        st.NegotiatedProtocol,
			Resumed:     st.DidResume,
			ServerName:  st.ServerName,
			Err:         err,
		}
	}
	r.add(vocab.BitTLSDone, Event{Kind: vocab.KindTLSDone, Err: err, Addr: st.NegotiatedProtocol, N: int64(st.Version)})
	r.mu.Unlock()
}

func (r *recorder) wroteHeaders() {
	r.mu.Lock()
	r.mark(vocab.BitWroteHeaders, vocab.KindWroteHeaders, 0, r.tl.Conn.ID, 0)
	r.mu.Unlock()
}

func (r *recorder) wait100Continue() {
	r.mu.Lock()
	r.mark(vocab.BitWait100Continue, vocab.KindWait100Continue, 0, r.tl.Conn.ID, 0)
	r.mu.Unlock()
}

func (r *recorder) wroteRequest(info stdtrace.WroteRequestInfo) {
	r.mu.Lock()
	r.wroteRequestLocked(info, 0)
	r.mu.Unlock()
}

// wroteBodiless is the WroteRequest hook of a request without a body,
// whose trace has no WroteHeaders hook. HTTP/1 reports such a request's
// headers and the request itself written one after the other, with no I/O
// in between (it writes both into the connection's buffer, which it
// flushes after both hooks). Both events are recorded here, at one time,
// which spares the write path a hook, a lock and a clock read on every
// such request. A write that failed records no headers event: the headers
// may not have gone out. HTTP/2 sends the HEADERS frame with END_STREAM
// and reports the request written only once it let other streams start,
// by when the response may have come and even been read; its headers
// written hook comes sooner, but can come after the response too.
// [Timeline.Timings] allows for both.
func (r *recorder) wroteBodiless(info stdtrace.WroteRequestInfo) {
	r.mu.Lock()
	var at time.Duration
	if info.Err == nil {
		at = time.Since(r.tl.Start)
		r.mark(vocab.BitWroteHeaders, vocab.KindWroteHeaders, at, r.tl.Conn.ID, 0)
	}
	r.wroteRequestLocked(info, at)
	r.mu.Unlock()
}

// wroteRequestLocked records the request written at offset at (0: now);
// r.mu is held.
func (r *recorder) wroteRequestLocked(info stdtrace.WroteRequestInfo, at time.Duration) {
	// A failed write (net/http reports it here too, e.g. when the request
	// was cancelled while its body was being sent) leaves the request in
	// the write stage.
	if info.Err != nil {
		r.add(vocab.BitWroteRequest, Event{Kind: vocab.KindWroteRequest, At: at, Conn: r.tl.Conn.ID, Err: info.Err})
		return
	}
	r.wrote = true
	if !r.tl.Finished && r.phase == vocab.StageWrite {
		r.phase = vocab.StageAwaitHeaders
	}
	r.mark(vocab.BitWroteRequest, vocab.KindWroteRequest, at, r.tl.Conn.ID, 0)
}

// stage returns the stage the request is in; r.mu is held.
func (r *recorder) stage() Stage {
	switch {
	case r.response:
		return vocab.StageBody
	case r.gotConn && (r.wrote || r.firstByte):
		return vocab.StageAwaitHeaders
	case r.gotConn:
		return vocab.StageWrite
	case r.phase == "":
		return vocab.StagePoolWait
	}
	return r.phase
}

// roundTripDone records the end of RoundTrip: the failure err, or the
// response resp. A response with a body (body) that is not empty starts
// the idle watchdog, if there is one, and the unclosed-body warning, in
// the same call.
func (r *recorder) roundTripDone(resp *http.Response, err error, body bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.finishLocked(vocab.ClassifyContext(r.ctx, err, r.stage()), r.stage(), err, 0)
		r.disarmHeldLocked()
		return
	}
	r.response = true
	r.tl.Status = resp.StatusCode
	r.tl.Proto = resp.Proto
	r.tl.ConnClose = resp.Close
	r.respAt = time.Since(r.tl.Start)
	r.mark(vocab.BitResponse, vocab.KindResponse, r.respAt, r.tl.Conn.ID, int64(resp.StatusCode))
	if body && resp.Body != http.NoBody {
		r.bodyStartedLocked()
	}
}

// bodyStartedLocked readies r for the response body it hands over, which
// is not empty: it starts the idle watchdog, if there is one, and the
// unclosed-body warning, if on; r.mu is held. An empty body (http.NoBody:
// HEAD, 204, Content-Length: 0) is at EOF from the start (see
// [recorder.emptyBody]).
func (r *recorder) bodyStartedLocked() {
	if r.tl.Finished {
		return
	}
	if r.t.bodyIdle > 0 {
		r.startWatchLocked()
	}
	if r.t.heldAfter > 0 {
		r.startHeldLocked()
	}
}

// emptyBody records the EOF of an empty body (http.NoBody) handed over:
// its connection is already back in the pool, so closing it unread is no
// early close.
func (r *recorder) emptyBody() {
	r.bodyRead(r.gen, 0, io.EOF)
}

// startHeldLocked sets the unclosed-body warning for the body handed
// over now, and arms its timer unless it is armed already (see heldList);
// r.mu is held.
func (r *recorder) startHeldLocked() {
	r.heldGen, r.heldSet = r.gen, true
	r.heldDue = r.respAt + r.t.heldAfter
	if r.heldArmed {
		return
	}
	r.heldArmed = true
	if r.held == nil {
		// The callback holds the recorder weakly (see heldList).
		r.weak = weak.Make(r)
		p, t := r.weak, r.t
		r.held = time.AfterFunc(r.t.heldAfter, func() {
			if r := p.Value(); r != nil {
				r.bodyHeld()
				return
			}
			t.held.remove(p)
		})
	} else {
		r.held.Reset(r.t.heldAfter)
	}
	r.t.held.add(r.weak)
}

// heldOpenLocked reports whether the body the warning is set for is open
// and unreported; r.mu is held.
func (r *recorder) heldOpenLocked() bool {
	return r.heldSet && r.heldGen == r.gen && !r.tl.BodyClosed && !r.tl.Finished && r.response
}

// disarmHeldLocked stops the warning's timer of a recorder that is not
// recycled (its request failed, had no body, or may still see hooks), so
// that no timer of a recorder dropped stays armed; r.mu is held. A
// recycled recorder keeps its timer armed (see heldList).
func (r *recorder) disarmHeldLocked() {
	if !r.heldArmed {
		return
	}
	r.held.Stop()
	r.heldArmed = false
	r.t.held.remove(r.weak)
}

// bodyHeld is the warning's timer firing: it reports every body of the
// Transport whose warning is due, in the order they fell due (see
// heldList), its own among them unless another timer's call reported it
// already; then it re-arms its timer for its body open and not yet due,
// or leaves the list.
func (r *recorder) bodyHeld() {
	r.t.held.reporting.Lock()
	now := time.Now()
	for _, d := range r.t.held.due(now) {
		d.r.reportHeld(d.gen)
	}
	r.t.held.reporting.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldOpenLocked() {
		r.held.Reset(max(r.tl.Start.Add(r.heldDue).Sub(now), time.Millisecond))
		return
	}
	r.heldArmed = false
	r.t.held.remove(r.weak)
}

// reportHeld reports the body of generation gen still open: a "body-held"
// event for the event observer. The warning of an earlier request of this
// recycled recorder finds another generation, or the body closed, and
// does nothing.
func (r *recorder) reportHeld(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || r.tl.BodyClosed || r.tl.Finished || !r.response {
		return
	}
	age := time.Since(r.tl.Start)
	if first, ok := r.tl.First(vocab.KindResponse); ok {
		age -= first.At
	}
	r.mark(vocab.BitBodyHeld, vocab.KindBodyHeld, 0, r.tl.Conn.ID, int64(age))
}

// bodyGone reports the body of generation gen garbage collected without
// Close: a "body-collected" event for the event observer.
func (r *recorder) bodyGone(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || r.tl.BodyClosed || r.tl.Finished {
		return
	}
	r.mark(vocab.BitBodyCollected, vocab.KindBodyCollected, 0, r.tl.Conn.ID, r.tl.BodyBytes)
}

// bodyRead records one Read of the body of the request of generation gen.
func (r *recorder) bodyRead(gen uint64, n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || r.tl.BodyClosed {
		return
	}
	r.tl.BodyBytes += int64(n)
	if n > 0 && r.timer != nil && r.cancel != nil {
		r.idleBy = time.Now().Add(r.t.bodyIdle)
		r.timer.Reset(r.t.bodyIdle)
	}
	switch {
	case err == io.EOF:
		if !r.tl.BodyEOF {
			r.tl.BodyEOF = true
			r.stopWatchLocked()
			r.mark(vocab.BitBodyEOF, vocab.KindBodyEOF, 0, r.tl.Conn.ID, r.tl.BodyBytes)
		}
	case err != nil && r.readErr == nil:
		r.readErr = err
	}
}

// bodyClose records the Close of the body of generation gen and finishes
// the timeline. It returns whether r may be reused, and the cancel of the
// request's own context (the body idle watchdog's), which the caller calls
// once the Transport's Close returned: an HTTP/2 body's Close waits for
// its stream's clean-up (and the close of a connection the server sent
// GOAWAY on) unless the request's context has ended, as it would not have
// without the watchdog.
func (r *recorder) bodyClose(gen uint64) (bool, context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || r.tl.BodyClosed {
		return false, nil
	}
	cancel := r.cancel
	r.cancel = nil
	r.tl.BodyClosed = true
	r.tl.ClosedEarly = !r.tl.BodyEOF
	at := time.Since(r.tl.Start)
	r.mark(vocab.BitBodyClose, vocab.KindBodyClose, at, r.tl.Conn.ID, r.tl.BodyBytes)
	if r.readErr != nil {
		class := vocab.ClassifyContext(r.ctx, r.readErr, vocab.StageBody)
		if r.idleFired && r.ctx.Err() == nil {
			// HTTP/2 reports the watchdog's cancel as plain
			// "context canceled", without its cause.
			class = vocab.ClassBodyIdleTimeout
		}
		r.finishLocked(class, vocab.StageBody, r.readErr, at)
	} else {
		r.finishLocked(vocab.ClassOK, vocab.StageBody, nil, at)
	}
	// Reuse only when no hook of this request can fire any more: every
	// GetConn was answered at once from the idle pool (so this request
	// started no dial), it is HTTP/1 (HTTP/2 hooks come from the
	// connection's own goroutines), the request was fully written and
	// answered, and the trace was never composed with a caller's.
	reuse := !r.tl.Composed && r.roundTrips == 1 && r.tl.GetConns > 0 && r.gotIdle == r.tl.GetConns &&
		!r.netEvents && r.connects == 0 && r.wrote && r.firstByte && r.tl.Proto == "HTTP/1.1"
	if !reuse {
		r.disarmHeldLocked()
	}
	return reuse, cancel
}

// finishLocked sets the outcome, records the done event at offset at (0:
// now) and hands the timeline to the observer.
func (r *recorder) finishLocked(class Class, stage Stage, err error, at time.Duration) {
	if r.tl.Finished {
		return
	}
	if class == vocab.ClassOK && r.response && (r.tl.Status < 100 || r.tl.Status > 999) {
		// net/http hands over a status line such as "HTTP/1.1 000"
		// as a response; it is not valid HTTP.
		class, err = vocab.ClassProtocol, fmt.Errorf("%w: %d", vocab.ErrBadStatus, r.tl.Status)
	}
	r.stopWatchLocked()
	if r.cancel != nil {
		r.cancel(nil)
		r.cancel = nil
	}
	r.tl.Outcome = Outcome{Class: class, Stage: stage, Status: r.tl.Status, Err: err}
	if err != nil {
		r.add(vocab.BitDone, Event{Kind: vocab.KindDone, At: at, Conn: r.tl.Conn.ID, N: int64(r.tl.Status), Err: err})
	} else {
		r.mark(vocab.BitDone, vocab.KindDone, at, r.tl.Conn.ID, int64(r.tl.Status))
	}
	if r.errs && r.req != nil {
		// The request is still the caller's to leave alone: its header
		// can be read.
		r.tl.secrets = redact.RequestSecrets(r.req, r.t.secretHeaders)
	}
	r.req = nil
	r.tl.Finished = true
	if r.t.obs != nil {
		r.t.obs.Observe(&r.tl)
	}
}

// startWatch arms the body idle watchdog; r.mu is held.
func (r *recorder) startWatchLocked() {
	r.watchGen = r.gen
	r.idleBy = time.Now().Add(r.t.bodyIdle)
	if r.timer == nil {
		r.timer = time.AfterFunc(r.t.bodyIdle, r.bodyIdleFired)
		return
	}
	r.timer.Reset(r.t.bodyIdle)
}

func (r *recorder) stopWatchLocked() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// idleFiredFor reports whether the body idle watchdog cancelled the
// request of generation gen.
func (r *recorder) idleFiredFor(gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen == gen && r.idleFired
}

func (r *recorder) bodyIdleFired() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchGen != r.gen || r.cancel == nil || r.tl.BodyEOF || r.tl.Finished || time.Now().Before(r.idleBy) {
		return
	}
	r.idleFired = true
	r.cancel(ErrBodyIdleTimeout)
}
