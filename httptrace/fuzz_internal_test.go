package httptrace

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	stdtrace "net/http/httptrace"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// FuzzRecorder drives one recorder, built by a Transport as RoundTrip
// builds it, with an arbitrary sequence of hook calls and of the calls
// RoundTrip and the body wrapper make (roundTripDone, bodyRead, bodyClose),
// split over one to three goroutines, with late and duplicate events and
// calls after the timeline finished. The data decode as:
//
//	byte 0: configuration (dialer hooks, body idle bound, headers, https,
//	        composed trace, goroutines)
//	byte 1: the caller's context (background, cancellable, expired, attempt)
//	then:   operations, an opcode byte (operation and goroutine) and its
//	        argument bytes; missing bytes read as 0.
//
// Hooks may come in any order from any goroutine (net/http fires them from
// several and after RoundTrip returned). The calls of RoundTrip and of the
// body follow RoundTrip's own protocol (roundTripDone once per request, body
// calls only for a body handed out, possibly stale or repeated), on the
// first goroutine. With one goroutine, a recorder that bodyClose declares
// reusable is reset and serves a new request, as body.Close does.
//
// Invariants: nothing panics; Observe is called once per finished request,
// never for an unfinished one, with the recorder locked; the observed
// timeline is finished, has exactly one done event, as its last, and no
// late event; over the whole life of a timeline, offsets never decrease,
// exactly the events after done are late, at most maxEvents are stored,
// every event (stored or dropped) reaches the EventObserver, Timings are
// never negative, and the outcome has a declared class and stage; stale body
// calls record nothing; bodyClose allows reuse if and only if the documented
// conditions hold, judged from the events the observer saw.
func FuzzRecorder(f *testing.F) {
	// Seeds: see fzRecorderSeeds for what each one is.
	for _, s := range fzRecorderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fuzzRecorder(data); err != nil {
			t.Fatal(err)
		}
	})
}

// Operations. The hook operations may run on any goroutine; the driver
// operations run on the first, as RoundTrip and the body wrapper do.
const (
	opGetConn = iota
	opGotConn
	opPutIdle
	opFirstByte
	opGot1xx
	opDNSStart
	opDNSDone
	opConnectStart
	opConnectDone
	opTLSStart
	opTLSDone
	opWroteHeaders
	opWait100
	opWroteRequest
	opIdleFired // the body idle watchdog's callback
	opDialTrace // a pool dialer calling DialTrace and TimelineID
	opYield     // runtime.Gosched, to vary interleavings
	opCancel    // the caller cancels its context
	opRoundTrip // driver: the base RoundTrip returned
	opBodyRead  // driver: a Read of the body
	opBodyClose // driver: Close of the body
	opCount
)

func isDriverOp(op int) bool { return op >= opRoundTrip }

// fzReader hands out the fuzz bytes; past the end it returns 0.
type fzReader struct {
	b []byte
	i int
}

func (r *fzReader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *fzReader) more() bool { return r.i < len(r.b) }

// fzConn is a connection with an id; it serves only what the recorder
// calls (addresses and the id).
type fzConn struct {
	net.Conn
	id uint64
}

func (c *fzConn) ConnID() uint64 { return c.id }
func (c *fzConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + int(c.id%1000)}
}
func (c *fzConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }

// fzWrap wraps a connection as *tls.Conn does (NetConn).
type fzWrap struct{ net.Conn }

func (w fzWrap) NetConn() net.Conn { return w.Conn }

type fzBase struct{}

func (fzBase) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("fzBase: not for sending")
}

// fzErr returns an error of the kinds net/http and the body report, from b.
func fzErr(b byte) error {
	switch b % 16 {
	case 0:
		return nil
	case 1:
		return io.EOF
	case 2:
		return io.ErrUnexpectedEOF
	case 3:
		return context.Canceled
	case 4:
		return context.DeadlineExceeded
	case 5:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case 6:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case 7:
		return ErrBodyIdleTimeout
	case 8:
		return errors.New("boom")
	case 9:
		return &net.DNSError{Err: "no such host", Name: "host.test", IsNotFound: true}
	case 10:
		return tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}
	case 11:
		return os.ErrDeadlineExceeded
	case 12:
		return fmt.Errorf("write: %w", syscall.EPIPE)
	case 13:
		return &url.Error{Op: "Get", URL: "http://user:***@127.0.0.1:8080/p?token=fzT0ken", Err: io.EOF}
	case 14:
		return errors.New("net/http: timeout awaiting response headers")
	}
	return errors.Join(context.Canceled, ErrBodyIdleTimeout)
}

// fzModel is what the events of one timeline established, as an
// EventObserver sees them: the basis of the reuse decision.
type fzModel struct {
	getConns, gotIdle int
	net               bool
	connects          int
	wrote, firstByte  bool
}

func (m *fzModel) event(tl *Timeline, e Event) {
	switch e.Kind {
	case vocab.KindGetConn:
		m.getConns++
		m.wrote, m.firstByte = false, false
	case vocab.KindGotConn:
		// The recorder sets tl.Conn before it records a GotConn that is
		// not late: WasIdle is this GotConn's.
		if !e.Late && tl.Conn.WasIdle {
			m.gotIdle++
		}
	case vocab.KindDNSStart, vocab.KindDNSDone, vocab.KindTLSStart, vocab.KindTLSDone:
		m.net = true
	case vocab.KindConnectStart:
		m.net = true
		m.connects++
	case vocab.KindConnectDone:
		m.net = true
		m.connects--
	case vocab.KindWroteRequest:
		if e.Err == nil {
			m.wrote = true
		}
	case vocab.KindFirstByte:
		m.firstByte = true
	}
}

// reusable is the documented reuse condition: no hook of the request can
// fire any more.
func (m fzModel) reusable(tl *Timeline) bool {
	return !tl.Composed && tl.Proto == "HTTP/1.1" && tl.BodyClosed && m.getConns > 0 && m.gotIdle == m.getConns &&
		!m.net && m.connects == 0 && m.wrote && m.firstByte
}

// fzObserver checks what the recorder hands to its observer.
type fzObserver struct {
	r *recorder

	mu       sync.Mutex
	observes map[uint64]int
	events   map[uint64]int
	models   map[uint64]*fzModel
	atFinish map[uint64]fzModel
	last     *Timeline
	errs     []error
}

func newFzObserver() *fzObserver {
	return &fzObserver{observes: map[uint64]int{}, events: map[uint64]int{}, models: map[uint64]*fzModel{}, atFinish: map[uint64]fzModel{}}
}

func (o *fzObserver) fail(format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf(format, args...))
}

func (o *fzObserver) Observe(tl *Timeline) {
	locked := !o.r.mu.TryLock()
	if !locked {
		o.r.mu.Unlock()
	}
	cl := tl.Clone()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !locked {
		o.fail("Observe called without the recorder's lock")
	}
	o.observes[tl.ID]++
	if n := o.observes[tl.ID]; n > 1 {
		o.fail("timeline %d observed %d times", tl.ID, n)
	}
	if m := o.models[tl.ID]; m != nil {
		o.atFinish[tl.ID] = *m
	}
	o.last = cl
	if !cl.Finished {
		o.fail("observed timeline %d is not finished", cl.ID)
	}
	if n := len(cl.Events); n == 0 || cl.Events[n-1].Kind != vocab.KindDone {
		o.fail("observed timeline %d does not end with its done event (%d events, %d dropped)", cl.ID, n, cl.Dropped)
	}
	for _, e := range cl.Events {
		if e.Late {
			o.fail("observed timeline %d holds a late event %v before it finished", cl.ID, e.Kind)
		}
	}
	if err := fzCheckTimeline(cl); err != nil {
		o.fail("observed timeline: %v", err)
	}
}

func (o *fzObserver) ObserveEvent(tl *Timeline, e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events[tl.ID]++
	if e.Late != tl.Finished {
		o.fail("event %v: Late=%v but the timeline's Finished=%v", e.Kind, e.Late, tl.Finished)
	}
	m := o.models[tl.ID]
	if m == nil {
		m = &fzModel{}
		o.models[tl.ID] = m
	}
	m.event(tl, e)
}

var (
	fzClasses = map[Class]bool{vocab.ClassOK: true, vocab.ClassConnectRefused: true, vocab.ClassConnectTimeout: true, vocab.ClassConnect: true,
		vocab.ClassDNS: true, vocab.ClassTLSHandshakeTimeout: true, vocab.ClassTLS: true, vocab.ClassResponseHeaderTimeout: true, vocab.ClassDeadline: true,
		vocab.ClassCanceled: true, vocab.ClassServerClosed: true, vocab.ClassReset: true, vocab.ClassBodyTruncated: true, vocab.ClassBodyIdleTimeout: true,
		vocab.ClassGoAway: true, vocab.ClassStreamReset: true, vocab.ClassProtocol: true, vocab.ClassTimeout: true, vocab.ClassError: true}
	fzStages = map[Stage]bool{vocab.StagePoolWait: true, vocab.StageDNS: true, vocab.StageConnect: true, vocab.StageTLS: true, vocab.StageWrite: true,
		vocab.StageAwaitHeaders: true, vocab.StageBody: true}
)

// fzCheckTimeline checks what holds for a timeline at any time: offsets in
// order, late events exactly after done, the storage bound, timings, the
// outcome of a finished timeline, and that its outputs can be produced.
func fzCheckTimeline(tl *Timeline) error {
	var errs []error
	if len(tl.Events) > maxEvents {
		errs = append(errs, fmt.Errorf("%d events stored, more than %d", len(tl.Events), maxEvents))
	}
	done := -1
	for i, e := range tl.Events {
		if e.At < 0 {
			errs = append(errs, fmt.Errorf("event %d (%v) at negative offset %v", i, e.Kind, e.At))
		}
		if i > 0 && e.At < tl.Events[i-1].At {
			errs = append(errs, fmt.Errorf("event %d (%v) at %v before event %d at %v", i, e.Kind, e.At, i-1, tl.Events[i-1].At))
		}
		if e.Kind == vocab.KindDone {
			if e.Late {
				errs = append(errs, fmt.Errorf("a late done event at %d", i))
			} else if done >= 0 {
				errs = append(errs, fmt.Errorf("two done events, at %d and %d", done, i))
			} else {
				done = i
			}
		}
		if late := done >= 0 && i > done; e.Late != late {
			errs = append(errs, fmt.Errorf("event %d (%v): Late=%v, done at %d", i, e.Kind, e.Late, done))
		}
	}
	if tl.Finished {
		if done < 0 {
			errs = append(errs, fmt.Errorf("finished with no done event (%d stored, %d dropped)", len(tl.Events), tl.Dropped))
		}
		if !fzClasses[tl.Outcome.Class] {
			errs = append(errs, fmt.Errorf("outcome class %q is not declared", tl.Outcome.Class))
		}
		if !fzStages[tl.Outcome.Stage] {
			errs = append(errs, fmt.Errorf("outcome stage %q is not declared", tl.Outcome.Stage))
		}
		if (tl.Outcome.Class == vocab.ClassOK) != (tl.Outcome.Err == nil) {
			errs = append(errs, fmt.Errorf("outcome %q with error %v", tl.Outcome.Class, tl.Outcome.Err))
		}
	} else if done >= 0 {
		errs = append(errs, fmt.Errorf("a done event at %d but not finished", done))
	}
	tm := tl.Timings()
	for name, d := range map[string]time.Duration{"pool wait": tm.PoolWait, "dns": tm.DNS, "connect": tm.Connect, "tls": tm.TLS,
		"write": tm.Write, "server": tm.Server, "transfer": tm.Transfer, "total": tm.Total, "idle for": tm.IdleFor} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("timing %s is negative: %v", name, d))
		}
	}
	if _, err := json.Marshal(tl); err != nil {
		errs = append(errs, fmt.Errorf("MarshalJSON: %v", err))
	}
	if err := tl.WriteText(io.Discard, true); err != nil {
		errs = append(errs, fmt.Errorf("WriteText: %v", err))
	}
	return errors.Join(errs...)
}

type fzOp struct {
	op   int
	args [4]byte
}

func fuzzRecorder(data []byte) error {
	rd := &fzReader{b: data}
	cfg, ctxKind := rd.byte(), rd.byte()

	obs := newFzObserver()
	opts := []Option{WithObserver(obs)}
	switch (cfg >> 1) & 3 {
	case 1:
		opts = append(opts, BodyIdleTimeout(time.Hour)) // armed, never fires by itself
	case 2:
		opts = append(opts, BodyIdleTimeout(time.Nanosecond)) // fires at once, on the timer's goroutine
	}
	if cfg&8 != 0 {
		opts = append(opts, Headers("Authorization", "X-Fuzz"))
	}
	scheme := "http"
	if cfg&16 != 0 {
		scheme = "https"
	}
	composed := cfg&32 != 0
	goroutines := 1 + int(cfg>>6)%3
	tr, err := NewTransport(fzBase{}, opts...)
	if err == nil && cfg&1 != 0 {
		tr.dialHooks = true
	}
	if err != nil {
		return err
	}
	r := newRecorder(tr)
	obs.r = r

	var ctxCancel context.CancelCauseFunc
	ctx := context.Background()
	switch ctxKind % 4 {
	case 1:
		ctx, ctxCancel = context.WithCancelCause(ctx)
	case 2:
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(1, 0))
		ctxCancel = func(error) { cancel() }
	case 3:
		ctx = hook.WithAttempt(ctx, int(ctxKind>>2))
	}
	defer func() {
		if ctxCancel != nil {
			ctxCancel(nil)
		}
	}()
	u := &url.URL{Scheme: scheme, User: url.UserPassword("fzUser", "fzPassw0rd"), Host: "127.0.0.1:8080", Path: "/p", RawQuery: "token=fzT0ken"}

	// start begins a request on r, as RoundTrip does.
	var (
		ids       []uint64
		gens      []uint64 // the generations of the bodies handed out
		state     int      // 0: before roundTripDone, 1: body out, 2: ended without a body
		reqCancel context.CancelCauseFunc
	)
	start := func() {
		req := (&http.Request{Method: http.MethodGet, URL: u, Host: u.Host,
			Header: http.Header{"Authorization": {"Bearer fzB3arer"}, "X-Fuzz": {"1"}}}).WithContext(ctx)
		r.begin(req)
		if tr.bodyIdle > 0 {
			_, r.cancel = context.WithCancelCause(r.ctx)
			reqCancel = r.cancel
		}
		r.tl.Composed = composed
		ids = append(ids, r.tl.ID)
		state = 0
	}
	start()
	defer func() {
		r.mu.Lock()
		r.stopWatchLocked()
		r.mu.Unlock()
		if reqCancel != nil {
			reqCancel(nil)
		}
	}()
	dialCtx := context.WithValue(ctx, hook.DialKey, r)

	// Decode the operations.
	const maxOps = 2048
	var lists = make([][]fzOp, goroutines)
	for n := 0; rd.more() && n < maxOps; n++ {
		b := rd.byte()
		o := fzOp{op: int(b) % opCount}
		g := int(b/opCount) % goroutines
		if isDriverOp(o.op) {
			g = 0
		}
		for i := range o.args {
			o.args[i] = rd.byte()
		}
		lists[g] = append(lists[g], o)
	}

	var (
		errsMu sync.Mutex
		errs   []error
	)
	hook := func(o fzOp) {
		a := o.args
		switch o.op {
		case opGetConn:
			r.getConn(u.Host)
		case opGotConn:
			var c net.Conn
			if a[0]&4 == 0 {
				c = &fzConn{id: uint64(a[1])}
				for range int(a[2] % 10) { // beyond 8 wrappers the id is not found
					c = fzWrap{c}
				}
			}
			r.gotConnHook(stdtrace.GotConnInfo{Conn: c, WasIdle: a[0]&1 != 0, Reused: a[0]&2 != 0,
				IdleTime: time.Duration(a[3]) * time.Millisecond})
		case opPutIdle:
			r.putIdleConn(fzErr(a[0]))
		case opFirstByte:
			r.gotFirstResponseByte()
		case opGot1xx:
			r.got1xxResponse(100+int(a[0])%100, nil)
		case opDNSStart:
			r.dnsStart(stdtrace.DNSStartInfo{Host: "host.test"})
		case opDNSDone:
			addrs := make([]net.IPAddr, int(a[0]%3))
			for i := range addrs {
				addrs[i] = net.IPAddr{IP: net.IPv4(127, 0, 0, byte(i+1))}
			}
			r.dnsDone(stdtrace.DNSDoneInfo{Addrs: addrs, Err: fzErr(a[1])})
		case opConnectStart:
			r.connectStart("tcp", fmt.Sprintf("127.0.0.%d:8080", a[0]))
		case opConnectDone:
			r.connectDone("tcp", fmt.Sprintf("127.0.0.%d:8080", a[0]), fzErr(a[1]))
		case opTLSStart:
			r.tlsHandshakeStart()
		case opTLSDone:
			st := tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, DidResume: a[0]&1 != 0}
			if a[0]&2 != 0 {
				st.NegotiatedProtocol = "h2"
			}
			r.tlsHandshakeDone(st, fzErr(a[1]))
		case opWroteHeaders:
			r.wroteHeaders()
		case opWait100:
			r.wait100Continue()
		case opWroteRequest:
			info := stdtrace.WroteRequestInfo{Err: fzErr(a[0])}
			if a[1]&1 != 0 {
				r.wroteBodiless(info) // a request without a body
			} else {
				r.wroteRequest(info)
			}
		case opIdleFired:
			r.bodyIdleFired()
		case opDialTrace:
			dctx := hook.DialFrom(dialCtx).DialTrace(dialCtx)
			var err error
			if id := hook.DialFrom(dialCtx).TimelineID(); id == 0 {
				err = errors.New("TimelineID of a dial context is 0")
			}
			if ct := stdtrace.ContextClientTrace(dctx); ct == nil || ct.ConnectStart == nil {
				err = errors.New("DialTrace returned no connect hooks")
			}
			if err != nil {
				errsMu.Lock()
				errs = append(errs, err)
				errsMu.Unlock()
			}
		case opYield:
			runtime.Gosched()
		case opCancel:
			if ctxCancel != nil {
				ctxCancel(fzErr(a[0]))
			}
		}
	}

	// driver runs RoundTrip's and the body's calls, in RoundTrip's order.
	// It returns an error when an invariant of the reuse decision fails.
	pickGen := func(a byte, b byte) (uint64, bool) {
		if len(gens) == 0 {
			return 0, false
		}
		if a&1 == 0 {
			return gens[len(gens)-1], true
		}
		return gens[int(b)%len(gens)], true
	}
	sequential := goroutines == 1
	driver := func(o fzOp) error {
		a := o.args
		switch o.op {
		case opRoundTrip:
			if state != 0 {
				return nil
			}
			if a[0]&1 != 0 {
				err := fzErr(a[1])
				if err == nil {
					err = errors.New("fz: round trip failed")
				}
				r.roundTripDone(nil, err, false)
				state = 2
				return nil
			}
			resp := &http.Response{StatusCode: 100 + int(a[1])%500, Close: a[0]&8 != 0}
			resp.Proto = [...]string{"HTTP/1.1", "HTTP/2.0", "HTTP/1.0", ""}[(a[0]>>1)&3]
			r.roundTripDone(resp, nil, false)
			kind := (a[0] >> 4) & 3
			if kind == 1 || resp.StatusCode == http.StatusSwitchingProtocols {
				r.mu.Lock()
				r.finishLocked(vocab.ClassOK, vocab.StageBody, nil, 0)
				r.mu.Unlock()
				state = 2
				return nil
			}
			gens = append(gens, r.gen)
			state = 1
			if kind == 2 { // http.NoBody
				r.emptyBody()
			} else {
				r.mu.Lock()
				r.bodyStartedLocked()
				r.mu.Unlock()
			}
		case opBodyRead:
			gen, ok := pickGen(a[0], a[1])
			if !ok {
				return nil
			}
			var err error
			switch a[3] % 4 {
			case 1:
				err = io.EOF
			case 2:
				err = io.ErrUnexpectedEOF
			case 3:
				err = fzErr(a[0] >> 1)
			}
			before := obs.eventCount()
			r.bodyRead(gen, int(a[2]), err)
			if sequential && gen != r.gen && obs.eventCount() != before {
				return fmt.Errorf("a Read of a stale body (gen %d, now %d) recorded an event", gen, r.gen)
			}
		case opBodyClose:
			gen, ok := pickGen(a[0], a[1])
			if !ok {
				return nil
			}
			before := obs.eventCount()
			observes := obs.observeCount()
			reuse, cancel := r.bodyClose(gen)
			if cancel != nil {
				cancel(nil)
			}
			finished := obs.observeCount() > observes
			if sequential && gen != r.gen && (reuse || obs.eventCount() != before) {
				return fmt.Errorf("a Close of a stale body (gen %d, now %d) recorded an event or allowed reuse", gen, r.gen)
			}
			cl, m := obs.lastFinished()
			if reuse {
				switch {
				case !finished || cl == nil || cl.ID != ids[len(ids)-1]:
					return errors.New("bodyClose allowed reuse but did not finish the timeline")
				case !m.reusable(cl):
					return fmt.Errorf("bodyClose allowed reuse against the documented conditions: %+v composed=%v proto=%q closed=%v",
						m, cl.Composed, cl.Proto, cl.BodyClosed)
				}
			} else if finished && m.reusable(cl) {
				return fmt.Errorf("bodyClose refused reuse though the documented conditions hold: %+v", m)
			}
			if reuse && sequential {
				// body.Close recycles the recorder: the next request.
				r.reset()
				start()
			}
		default:
			hook(o)
		}
		return nil
	}

	if sequential {
		for _, o := range lists[0] {
			if err := driver(o); err != nil {
				errs = append(errs, err)
				break
			}
		}
	} else {
		var wg sync.WaitGroup
		release := make(chan struct{})
		for g := 1; g < goroutines; g++ {
			wg.Go(func() {
				<-release
				for _, o := range lists[g] {
					hook(o)
				}
			})
		}
		close(release)
		for _, o := range lists[0] {
			if err := driver(o); err != nil {
				errsMu.Lock()
				errs = append(errs, err)
				errsMu.Unlock()
				break
			}
		}
		wg.Wait()
	}

	// The final state of the current timeline, late events included.
	r.mu.Lock()
	final := r.tl.Clone()
	r.mu.Unlock()
	if err := fzCheckTimeline(final); err != nil {
		errs = append(errs, fmt.Errorf("final timeline %d: %w", final.ID, err))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	errs = append(errs, obs.errs...)
	for i, id := range ids {
		want := 1 // recycled requests finished
		if i == len(ids)-1 && !final.Finished {
			want = 0
		}
		if n := obs.observes[id]; n != want {
			errs = append(errs, fmt.Errorf("timeline %d observed %d times, want %d", id, n, want))
		}
	}
	if n, want := obs.events[final.ID], len(final.Events)+final.Dropped; n != want {
		errs = append(errs, fmt.Errorf("the EventObserver saw %d events, the timeline has %d stored + %d dropped", n, len(final.Events), final.Dropped))
	}
	return errors.Join(errs...)
}

// eventCount and observeCount return the events and the finished
// timelines the observer saw, over all timelines.
func (o *fzObserver) eventCount() int   { return o.total(&o.events) }
func (o *fzObserver) observeCount() int { return o.total(&o.observes) }

// total sums the counts of *m under o.mu.
func (o *fzObserver) total(m *map[uint64]int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range *m {
		n += c
	}
	return n
}

// lastFinished returns the last observed timeline and the model of its
// events when it finished.
func (o *fzObserver) lastFinished() (*Timeline, fzModel) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		return nil, fzModel{}
	}
	return o.last, o.atFinish[o.last.ID]
}

// fzRecorderSeeds are hand-written sequences of the common request shapes.
func fzRecorderSeeds() [][]byte {
	op := func(o int, args ...byte) []byte { return append([]byte{byte(o)}, append(args, 0, 0, 0, 0)[:4]...) }
	seq := func(cfg, ctx byte, ops ...[]byte) []byte { return append([]byte{cfg, ctx}, bytes.Join(ops, nil)...) }
	const (
		idle    = 1 // GotConn WasIdle
		reused  = 2 // GotConn Reused
		ok11    = 0 // roundTrip: success, HTTP/1.1, body
		failure = 1 // roundTrip: failure
	)
	steady := [][]byte{op(opGetConn), op(opGotConn, idle|reused, 7), op(opWroteHeaders), op(opWroteRequest),
		op(opFirstByte), op(opRoundTrip, ok11, 100), op(opBodyRead, 0, 0, 2, 0), op(opBodyRead, 0, 0, 0, 1), op(opBodyClose)}
	fresh := [][]byte{op(opGetConn), op(opDNSStart), op(opDNSDone, 1), op(opConnectStart, 1), op(opConnectDone, 1),
		op(opTLSStart), op(opTLSDone), op(opGotConn, 0, 3), op(opWroteHeaders), op(opWroteRequest), op(opFirstByte),
		op(opRoundTrip, ok11, 100), op(opBodyRead, 0, 0, 5, 1), op(opBodyClose)}
	var seeds [][]byte
	// A keep-alive request, recycled twice, then stale body calls.
	s := seq(0, 0)
	for range 3 {
		s = append(s, bytes.Join(steady, nil)...)
	}
	s = append(s, op(opBodyRead, 1, 0, 3, 1)...)
	s = append(s, op(opBodyClose, 1, 1)...)
	seeds = append(seeds, s)
	// The same request without a body: one write hook for both events,
	// recycled; then a failed bodiless write.
	bodiless := slices.Concat(steady[:2], [][]byte{op(opWroteRequest, 0, 1)}, steady[4:])
	s = seq(0, 0)
	for range 2 {
		s = append(s, bytes.Join(bodiless, nil)...)
	}
	s = append(s, bytes.Join([][]byte{op(opGetConn), op(opGotConn, idle|reused, 7), op(opWroteRequest, 6, 1),
		op(opRoundTrip, failure, 5)}, nil)...)
	seeds = append(seeds, s)
	// A fresh https connection, with dial hooks, headers recorded.
	seeds = append(seeds, seq(1|8|16, 0, fresh...))
	// A dial refused, then the late end of a background dial.
	seeds = append(seeds, seq(0, 0, op(opGetConn), op(opConnectStart, 1), op(opConnectDone, 1, 5),
		op(opRoundTrip, failure, 5), op(opConnectStart, 2), op(opConnectDone, 2), op(opGotConn, 0, 4), op(opPutIdle)))
	// Cancelled while waiting for the pool.
	seeds = append(seeds, seq(0, 1, op(opGetConn), op(opCancel), op(opRoundTrip, failure, 3), op(opGotConn, idle, 1)))
	// Body idle watchdog armed and fired, the read then fails.
	seeds = append(seeds, seq(1<<1, 0, append(steady[:6:6], op(opBodyRead, 0, 0, 1, 0), op(opIdleFired),
		op(opBodyRead, 0, 0, 0, 3), op(opBodyClose))...))
	// The watchdog with a 1ns bound, firing on its own goroutine.
	seeds = append(seeds, seq(2<<1|0x80, 1, fresh...))
	// HTTP/2: never reused; events from three goroutines.
	h2 := append([][]byte{}, steady...)
	h2[5] = op(opRoundTrip, 1<<1, 100)
	seeds = append(seeds, seq(0x80, 0, h2...))
	// A hidden retry: two GetConns, the first connection failed.
	seeds = append(seeds, seq(0, 0, op(opGetConn), op(opGotConn, idle|reused, 1), op(opWroteRequest, 6),
		op(opGetConn), op(opConnectStart), op(opConnectDone), op(opGotConn, 0, 2), op(opWroteRequest), op(opFirstByte),
		op(opRoundTrip, ok11, 100), op(opBodyRead, 0, 0, 1, 1), op(opBodyClose)))
	// No body (nil), a 101, an empty body closed unread.
	seeds = append(seeds, seq(0, 0, op(opGetConn), op(opGotConn, idle, 1), op(opRoundTrip, 1<<4, 100), op(opGotConn, idle, 2)))
	seeds = append(seeds, seq(0, 0, op(opGetConn), op(opGotConn, idle, 1), op(opRoundTrip, 0, 1), op(opBodyClose)))
	seeds = append(seeds, seq(0, 0, op(opGetConn), op(opGotConn, idle, 1), op(opWroteRequest), op(opFirstByte),
		op(opRoundTrip, 2<<4, 104), op(opBodyClose)))
	// A composed trace, a deadline already passed.
	seeds = append(seeds, seq(32, 2, steady...))
	seeds = append(seeds, seq(0, 2, op(opGetConn), op(opRoundTrip, failure, 4)))
	// Many informational responses: more events than a timeline stores.
	s = seq(0, 0, op(opGetConn), op(opGotConn, idle, 1), op(opWroteRequest))
	for range maxEvents + 10 {
		s = append(s, op(opGot1xx, 3)...)
	}
	s = append(s, bytes.Join([][]byte{op(opFirstByte), op(opRoundTrip, ok11, 100), op(opBodyRead, 0, 0, 1, 1), op(opBodyClose)}, nil)...)
	seeds = append(seeds, s)
	// Duplicate and late events from two goroutines after the end.
	s = seq(0x40, 0, steady...)
	for _, o := range []int{opGetConn, opGotConn, opFirstByte, opWroteRequest, opPutIdle, opTLSDone, opDNSDone} {
		s = append(s, op(o+opCount)...) // the second goroutine
	}
	seeds = append(seeds, s)
	return seeds
}
