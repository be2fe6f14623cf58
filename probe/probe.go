package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// errDeadline is the cause with which the probe's own deadline ends its
// context; errRequestTimeout that of a request's timeout.
var (
	errDeadline             = errors.New("probe: deadline reached")
	errRequestTimeout error = requestTimeoutError{}
)

// requestTimeoutError is a request's timeout: a deadline
// (context.DeadlineExceeded for errors.Is), though a timer of the sender's
// ends the request's context, not a context deadline.
type requestTimeoutError struct{}

func (requestTimeoutError) Error() string        { return "probe: request timeout reached" }
func (requestTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (requestTimeoutError) Timeout() bool        { return true }

// settleBound bounds the wait, after a phase, for the pool's connections
// to close once the probe closed its idle ones.
const settleBound = 3 * time.Second

// endGrace bounds that wait once the run's context has ended (the
// deadline, or the caller's context), and a response body's read once its
// request's context has (see sender.watch): Run returns within about
// endGrace of the end, however the server behaves. What is waited for by
// then takes the client's own work and at most one round trip to the
// server: the closes net/http makes when a request is cancelled (an HTTP/1
// connection; an HTTP/2 stream's reset), the idle closes the probe asked
// for, the server's answer to them (a FIN, a TLS close_notify). 500 ms
// holds a round trip to a host on the far side of the world with room to
// spare, and is short enough that an interrupt feels immediate. A
// connection the server keeps from closing (an HTTP/2 server that floods
// PINGs and reads nothing blocks the client's acknowledgements, and with
// them the stream's reset) is reported as still open.
const endGrace = 500 * time.Millisecond

// UnusableError is returned by [Run] with the report when no main-run
// request got a response: the target refused, could not be resolved,
// failed the TLS handshake, spoke no HTTP, or never answered in time.
type UnusableError struct {
	// Sent is the number of requests sent, Failed those that failed.
	Sent, Failed int
	// Class and Stage are those of the most frequent failure.
	Class httptrace.Class
	Stage httptrace.Stage
	// Err is that failure's first error text, redacted and on one line.
	Err string
}

// Error says what no request got past, on one line: "no request succeeded
// (2 of 2 failed): connect-refused @connect: dial tcp …".
func (e *UnusableError) Error() string {
	if e == nil {
		return "probe: nil *UnusableError"
	}
	if e.Sent == 0 {
		return "no request was sent before the deadline"
	}
	msg := fmt.Sprintf("no request succeeded (%d of %d failed): %s", e.Failed, e.Sent, e.Class)
	if e.Stage != "" {
		msg += " @" + string(e.Stage)
	}
	if e.Err != "" {
		msg += ": " + e.Err
	}
	return msg
}

// Run probes the host of target: it sends the configured number of copies
// of target through a fresh tracked pool, then runs the discovery phases
// asked for, and returns what it found.
//
// target is a template: its context is ignored (ctx and the options bound
// the probe) and its body, if any, is replayed with GetBody, which must be
// set. Redirects are not followed: a 3xx response is an outcome like any
// other, so the probe never sends more requests than asked.
//
// Run returns a nil report and an error when the options or target make
// no sense; the report and an [*UnusableError] when no request got a
// response; the report and nil otherwise, however many findings it has. It
// returns once every request ended and every connection of its pools was
// closed, or a few seconds after its requests ended, at most; once ctx or
// the [Deadline] ended the run, within about half a second of that end (a
// connection the server keeps from closing is then reported still open).
// It never writes anywhere.
func Run(ctx context.Context, target *http.Request, opts ...Option) (*Result, error) {
	if ctx == nil {
		return nil, errors.New("probe: nil context")
	}
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("probe: nil option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := checkTarget(target, &cfg); err != nil {
		return nil, err
	}
	start := time.Now()
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cfg.deadline > 0 {
		runCtx, cancel = context.WithDeadlineCause(ctx, start.Add(cfg.deadline), errDeadline)
	}
	defer cancel()
	pr := &prober{cfg: cfg, target: target, start: start, ctx: runCtx,
		secrets: redact.RequestSecrets(target, slices.Collect(maps.Keys(target.Header)))}
	defer context.AfterFunc(runCtx, func() {
		now := time.Now()
		pr.ended.Store(&now)
	})()
	rep, err := pr.mainRun()
	if err != nil {
		return nil, err
	}
	var unusable *UnusableError
	if rep.Outcomes[vocab.ClassOK] == 0 && ctx.Err() == nil {
		// Nothing answered, and not because the caller gave up.
		unusable = pr.unusable(rep)
		rep.Unreachable = true
	}
	if unusable == nil && (cfg.findMaxReqs > 0 || cfg.findIdle) {
		rep.Discovery = &Discovery{}
		if cfg.findMaxReqs > 0 {
			rep.Discovery.MaxRequests = pr.findMaxRequests()
			rep.Discovery.Requests += rep.Discovery.MaxRequests.Requests
			rep.Discovery.Dials += rep.Discovery.MaxRequests.Dials
		}
		if cfg.findIdle {
			rep.Discovery.IdleTimeout = pr.findIdleTimeout()
			rep.Discovery.Requests += rep.Discovery.IdleTimeout.Requests
			rep.Discovery.Dials += rep.Discovery.IdleTimeout.Dials
		}
	}
	if pr.stopped.Load() {
		// A phase stops early for the deadline (its context ended with
		// errDeadline, or discovery saw too little time left before it) or
		// because the caller's context ended.
		if runCtx.Err() == nil || errors.Is(context.Cause(runCtx), errDeadline) {
			rep.DeadlineReached = true
		} else {
			rep.Interrupted = true
		}
	}
	rep.Elapsed = time.Since(start)
	pr.ev.retries.judge(rep, serverIdleTimeout(rep), pr.h2Resets.Load())
	rep.Findings = findings(rep, &pr.cfg, &pr.ev, target.URL.Scheme == "https")
	sortFindings(rep.Findings)
	if unusable != nil {
		return rep, unusable
	}
	return rep, nil
}

func checkTarget(target *http.Request, cfg *config) error {
	if target == nil || target.URL == nil {
		return errors.New("probe: nil target request")
	}
	u := target.URL
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("probe: URL %s: scheme must be http or https", redact.URL(u))
	}
	if u.Hostname() == "" {
		return fmt.Errorf("probe: URL %s has no host", redact.URL(u))
	}
	if cfg.requireHTTP2 && u.Scheme != "https" {
		return errors.New("probe: HTTP/2 can only be required of an https URL")
	}
	if target.Body != nil && target.Body != http.NoBody && target.GetBody == nil {
		return errors.New("probe: a target request with a body needs GetBody to replay it")
	}
	return nil
}

// prober holds the state of one Run.
type prober struct {
	cfg    config
	target *http.Request
	// secrets are target's header secrets: every header's value, masked
	// in what the report quotes of the server's replies.
	secrets []redact.Secret
	start   time.Time
	ctx     context.Context // the run's context, with the deadline
	// stopped is set when the run's context ended a phase early.
	stopped atomic.Bool

	ev evidence
	// h2Resets counts the main run's HTTP/2 streams the server reset with
	// PROTOCOL_ERROR (which the Transport may send again).
	h2Resets atomic.Int64
	// mainSent counts the main run's requests sent so far.
	mainSent atomic.Int64
	// ended is when ctx ended, nil before.
	ended atomic.Pointer[time.Time]

	progressMu sync.Mutex
	mainDials  func() int64
}

// mask returns s, a text the server wrote, with the request's secrets
// masked: a server may fill what it writes with what it was sent.
func (pr *prober) mask(s string) string {
	return redact.Mask(s, pr.target.URL, pr.secrets)
}

func (pr *prober) progress(p Progress) {
	if pr.cfg.progress == nil {
		return
	}
	p.Elapsed = time.Since(pr.start)
	if pr.mainDials != nil {
		p.Dials = pr.mainDials()
	}
	pr.progressMu.Lock()
	defer pr.progressMu.Unlock()
	pr.cfg.progress(p)
}

// progressTimeline hands the progress function a finished main-run
// timeline.
func (pr *prober) progressTimeline(tl *httptrace.Timeline) {
	pr.progress(Progress{Phase: "requests", Done: int(pr.mainSent.Load()), Total: pr.cfg.requests, Timeline: tl})
}

// newPool returns a pool for one phase of the probe; the main run's
// (main) counts the HTTP/2 streams reset with PROTOCOL_ERROR.
func (pr *prober) newPool(obs httptrace.Observer, maxConns, maxIdle int, idle time.Duration, main bool) (*pool.Pool, *http.Client, error) {
	tc := &tls.Config{}
	if pr.cfg.tlsConfig != nil {
		tc = pr.cfg.tlsConfig.Clone()
	}
	if tc.ClientSessionCache == nil {
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	opts := []pool.Option{
		pool.MaxConnsPerHost(maxConns),
		pool.MaxIdleConnsPerHost(maxIdle),
		pool.ConnectTimeout(pr.cfg.timeout),
		pool.TLSHandshakeTimeout(pr.cfg.timeout),
		pool.IdleConnTimeout(idle),
		pool.TLSClientConfig(tc),
		pool.KeepClosed(maxKeptConns),
		pool.WithObserver(obs),
	}
	if pr.cfg.http1 {
		var http1 http.Protocols
		http1.SetHTTP1(true)
		opts = append(opts, pool.Protocols(http1))
	}
	if len(pr.target.Header) > 0 {
		// The report prints no header value; nor may an error that
		// quotes one.
		opts = append(opts, pool.SecretHeaders(slices.Collect(maps.Keys(pr.target.Header))...))
	}
	// A transport of the probe's own, with no proxy: the connections
	// audited are the target's, never a proxy's.
	base := &http.Transport{ForceAttemptHTTP2: true, MaxResponseHeaderBytes: maxResponseHeaderBytes}
	if main {
		base.HTTP2 = &http.HTTP2Config{CountError: func(errType string) {
			if errType == "recv_rststream_PROTOCOL_ERROR" {
				pr.h2Resets.Add(1)
			}
		}}
	}
	p, err := pool.Track(base, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	client := &http.Client{
		Transport: p.RoundTripper(),
		// Never follow a redirect: it would be a request not asked for.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p, client, nil
}

// settle closes the pool's idle connections, which also cancels dials left
// behind by requests that gave up, and waits until none is open: at most
// settleBound, and once the run's context has ended, until endGrace after
// that end at most. The wait goes on past the end of the run's context, so
// that the closes the end itself causes are in the report, but not by more
// than endGrace in all (a body's read the watch ended used some of it).
func (pr *prober) settle(p *pool.Pool) {
	p.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(pr.ctx), pr.cfg.settleBound)
	defer cancel()
	stop := context.AfterFunc(pr.ctx, func() {
		grace := time.NewTimer(pr.graceLeft())
		defer grace.Stop()
		select {
		case <-grace.C:
			cancel()
		case <-ctx.Done():
		}
	})
	defer stop()
	p.WaitFor(ctx, func(s pool.Stats) bool { return s.Open == 0 && s.Dialing == 0 && s.InFlight == 0 })
}

// graceLeft returns what is left of endGrace since the run's context
// ended: all of it if it has not, or only just.
func (pr *prober) graceLeft() time.Duration {
	if at := pr.ended.Load(); at != nil {
		return max(0, endGrace-time.Since(*at))
	}
	return endGrace
}

// sender sends the probe's requests, one after another, for one goroutine.
// Each request is bounded by the request timeout as a per-request
// context.WithTimeoutCause would bound it, but one context and one timer
// serve request after request: the timer is re-armed for each request, and
// the context replaced only once the timer fired. A new context (linked to
// the run's) and a new timer for each request cost a loopback request
// several percent of its time (BenchmarkSendPaired), which the probe's
// throughput would show.
type sender struct {
	pr     *prober
	client *http.Client
	ctx    context.Context // the requests' context, until timer fires
	cancel context.CancelCauseFunc
	timer  *time.Timer   // ends ctx with errRequestTimeout
	req    *http.Request // the target with ctx, reused when it has no body
	body   io.LimitedReader
	one    [1]byte // the byte read past MaxBody
	ka     keepAliveSeen
	// stopWatch stops the watch of ctx (see watch).
	stopWatch func() bool

	// mu guards what the watch shares with the sender.
	mu       sync.Mutex
	reading  io.Closer       // the body being read, nil between reads
	readCtx  context.Context // the context of its request
	unstuck  bool            // the watch closed it
	grace    *time.Timer     // the watch's timer, once a context ended
	finished bool            // close was called: no watch arms a timer
}

func (pr *prober) newSender(client *http.Client) *sender {
	return &sender{pr: pr, client: client}
}

// arm returns the context of the next request, its timer started.
func (s *sender) arm() context.Context {
	if s.ctx != nil {
		s.timer.Reset(s.pr.cfg.timeout)
		return s.ctx
	}
	ctx, cancel := context.WithCancelCause(s.pr.ctx)
	s.ctx, s.cancel, s.req = ctx, cancel, nil
	s.timer = time.AfterFunc(s.pr.cfg.timeout, func() { cancel(errRequestTimeout) })
	s.stopWatch = context.AfterFunc(ctx, func() { s.watch(ctx) })
	return ctx
}

// watch runs once ctx has ended. A read of a response body ends with its
// request's context, as a rule; an HTTP/2 body's does not when its
// connection cannot write: the read waits for the stream's reset, the reset
// for the connection's write lock, and the lock's holder for a server that
// reads nothing (one that floods PINGs, whose acknowledgements fill the
// connection). So a read still going on endGrace after the end of its
// context is ended: the watch closes its body.
func (s *sender) watch(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	if s.grace != nil {
		// An earlier context's: its read is over.
		s.grace.Stop()
	}
	s.grace = time.AfterFunc(endGrace, func() { s.unstick(ctx) })
}

// unstick closes the body being read, if its request's context is ctx.
func (s *sender) unstick(ctx context.Context) {
	s.mu.Lock()
	body := s.reading
	if body == nil || s.readCtx != ctx {
		s.mu.Unlock()
		return
	}
	s.reading, s.readCtx, s.unstuck = nil, nil, true
	s.mu.Unlock()
	body.Close()
}

// startRead shows the watch the body about to be read. It reports false,
// and closes the body, when the request's context has already ended: the
// read would not be bounded (see watch).
func (s *sender) startRead(ctx context.Context, body io.Closer) bool {
	s.mu.Lock()
	s.reading, s.readCtx = body, ctx
	s.mu.Unlock()
	if ctx.Err() == nil {
		return true
	}
	if s.endRead() {
		body.Close()
	}
	return false
}

// endRead hides the body read from the watch; it reports whether the
// sender is to close it (the watch has not).
func (s *sender) endRead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	unstuck := s.unstuck
	s.reading, s.readCtx, s.unstuck = nil, nil, false
	return !unstuck
}

// disarm stops the timer once a request ended. A timer that already fired
// ended (or is ending) the context: the next request gets a new one.
func (s *sender) disarm() {
	if !s.timer.Stop() {
		s.cancel(errRequestTimeout)
		s.ctx = nil
	}
}

// close releases the sender's context, timer and watch.
func (s *sender) close() {
	if s.ctx != nil {
		s.stopWatch()
		s.timer.Stop()
		s.cancel(nil)
		s.ctx = nil
	}
	s.mu.Lock()
	s.finished = true
	if s.grace != nil {
		s.grace.Stop()
	}
	s.mu.Unlock()
}

// send sends one copy of the target and reads the response body (up to the
// body bound; a 101 response's, the switched connection, not at all). It
// returns false when the run's context had ended before the request could
// be sent.
func (s *sender) send() bool {
	pr := s.pr
	if pr.ctx.Err() != nil {
		pr.stopped.Store(true)
		return false
	}
	ctx := s.arm()
	defer s.disarm()
	req := s.req
	if req == nil || pr.target.GetBody != nil {
		// A shallow copy is enough: neither the Transport nor the Client
		// changes the template's header or URL (the Client copies the
		// header before it adds to it). Without a body it serves every
		// request of this context: net/http leaves a request alone once
		// the response body is closed.
		req = pr.target.WithContext(ctx)
		if pr.target.GetBody == nil {
			s.req = req
		} else {
			body, err := pr.target.GetBody()
			if err != nil {
				// The template's own GetBody failed: send without the
				// body would be another request; count it as not sent.
				return false
			}
			req.Body = body
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if pr.ctx.Err() != nil {
			pr.stopped.Store(true)
		}
		return true
	}
	if v := resp.Header["Keep-Alive"]; len(v) > 0 {
		s.ka.see(v[0], pr.mask)
	}
	// A 101 response's body is the connection, handed over to the
	// protocol switched to: reading it waits for what the server sends
	// next, and neither the request's timeout nor the run's deadline
	// bounds that wait. It is closed unread.
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
	} else if s.startRead(ctx, resp.Body) {
		s.body = io.LimitedReader{R: resp.Body, N: pr.cfg.maxBody}
		if _, err := io.Copy(io.Discard, &s.body); err == nil && s.body.N == 0 {
			// MaxBody read: one byte more says whether the body went
			// on (the aggregator counts the request failed) or ended
			// there, as trace -max-body does.
			io.ReadFull(resp.Body, s.one[:])
		}
		s.body.R = nil
		if s.endRead() {
			resp.Body.Close()
		}
	}
	if pr.ctx.Err() != nil {
		pr.stopped.Store(true)
	}
	return true
}

// sleep waits d or until the run's context ends; it reports whether the
// whole of d passed.
func (pr *prober) sleep(d time.Duration) bool {
	if d <= 0 {
		return pr.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		if pr.ctx.Err() == nil {
			return true
		}
		// Both were ready: the run's end wins.
	case <-pr.ctx.Done():
	}
	pr.stopped.Store(true)
	return false
}

// mainRun sends the requests and builds the report's main-run part.
func (pr *prober) mainRun() (*Result, error) {
	cfg := &pr.cfg
	agg := newAggregator(pr.ctx, cfg.keepTimelines, cfg.timeout, cfg.maxBody)
	maxIdle := max(cfg.conns, cfg.concurrency)
	p, client, err := pr.newPool(agg, cfg.conns, maxIdle, cfg.clientIdle, true)
	if err != nil {
		return nil, err
	}
	agg.pool = p
	if cfg.progress != nil {
		agg.stream = pr.progressTimeline
	}
	pr.mainDials = func() int64 { return p.Stats().Dials }
	var (
		next    atomic.Int64
		sent    = &pr.mainSent
		wg      sync.WaitGroup
		timeUp  atomic.Bool // the Duration has passed
		senders = make([]*sender, cfg.concurrency)
	)
	if cfg.duration > 0 {
		t := time.AfterFunc(cfg.duration, func() { timeUp.Store(true) })
		defer t.Stop()
	}
	for i := range cfg.concurrency {
		s := pr.newSender(client)
		senders[i] = s
		wg.Go(func() {
			defer s.close()
			for first := true; ; first = false {
				// However short the Duration, the run's first request
				// is sent: a run that asked nothing of the target
				// would report nothing of it.
				if n := next.Add(1); n > int64(cfg.requests) || (n > 1 && timeUp.Load()) {
					return
				}
				if !first && (!pr.sleep(cfg.gap) || timeUp.Load()) {
					return
				}
				if !s.send() {
					return
				}
				done := int(sent.Add(1))
				pr.progress(Progress{Phase: "requests", Done: done, Total: cfg.requests})
			}
		})
	}
	wg.Wait()
	mainElapsed := time.Since(pr.start)
	pr.settle(p)
	pr.mainDials = nil
	dials := p.Stats().Dials
	pr.progress(Progress{Phase: "requests", Done: int(sent.Load()), Total: cfg.requests, Dials: dials})

	rep := &Result{
		Schema:          schemaVersion,
		Target:          redact.URL(pr.target.URL),
		Method:          methodOf(pr.target),
		Requested:       cfg.requests,
		Requests:        int(sent.Load()),
		Concurrency:     cfg.concurrency,
		MaxConnsPerHost: cfg.conns,
		Gap:             cfg.gap,
		Timeout:         cfg.timeout,
		Deadline:        cfg.deadline,
		IdleConnTimeout: cfg.clientIdle,
		MainElapsed:     mainElapsed,
		Duration:        cfg.duration,
	}
	if mainElapsed > 0 {
		rep.RequestsPerSecond = float64(rep.Requests) / mainElapsed.Seconds()
	}
	if rep.Requests < rep.Requested && !timeUp.Load() {
		pr.stopped.Store(true)
	}
	var ka keepAliveSeen
	for _, s := range senders {
		ka.merge(&s.ka)
	}
	ka.fill(rep)
	pr.ev = agg.fill(rep)
	st := p.Stats()
	rep.Dials, rep.DialErrors = st.Dials, st.DialErrors
	rep.ClosedBy = st.ClosedBy
	if rep.ClosedBy == nil {
		rep.ClosedBy = map[pool.CloseReason]int64{}
	}
	if rep.Cut > 0 {
		pr.stopped.Store(true)
	}
	fillConns(rep, p.Conns(), int(st.Dials), &pr.ev)
	rep.PerfectDials = perfectDials(rep, cfg)
	return rep, nil
}

func methodOf(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// perfectDials is the number of dials with perfect keep-alive: one per
// connection the pool may use at once (HTTP/2: one in all), never more than
// the requests sent.
func perfectDials(rep *Result, cfg *config) int {
	m := cfg.concurrency
	if cfg.conns > 0 {
		m = min(cfg.conns, cfg.concurrency)
	}
	if rep.Protocols["h2"] > 0 {
		m = 1
	}
	return min(m, rep.Requests)
}

// fillConns fills the connection part of rep from the pool's snapshot and
// what the timelines said of each connection.
func fillConns(rep *Result, conns []pool.Conn, dials int, ev *evidence) {
	rep.Protocols = map[string]int{}
	rep.Connections = []Connection{}
	rep.ConnectionsOmitted = max(0, dials-len(conns))
	var (
		tlsSum TLSSummary
		// firstDone is when the first TLS handshake finished.
		firstDone time.Time
	)
	tlsSum.Versions = map[string]int{}
	for _, c := range conns {
		if c.TLSVersion != "" {
			if at, ok := openedAt(c); ok && (firstDone.IsZero() || at.Before(firstDone)) {
				firstDone = at
			}
		}
	}
	for _, c := range conns {
		conn := Connection{ID: c.ID, Proto: c.Proto, TLSVersion: c.TLSVersion, TLSResumed: c.TLSResumed,
			Requests: c.Requests, ClosedBy: c.ClosedBy, CloseReason: c.CloseReason, CloseDetail: c.CloseDetail,
			DialError: oneLine(c.DialError), DialedAt: c.DialedAt, FirstUsedAt: c.FirstUsedAt, ClosedAt: c.ClosedAt}
		if t, ok := ev.conns[c.ID]; ok {
			conn.Responses = t.answered
			if c.ClosedBy == vocab.ClosedByServer && announcedByResponse(c.CloseReason) {
				conn.CloseStatus = t.closeStatus
			}
		}
		if c.CloseReason == vocab.ReasonServerClosedIdle {
			conn.IdleBeforeClose = idleBeforeClose(c)
		}
		if c.Requests == 0 && (c.DialError == "" || c.Abandoned) {
			ev.idleDials++
		}
		if c.CloseReason == vocab.ReasonH2Unused {
			if at, ok := openedAt(c); ok && at.After(c.DialedAt) {
				ev.unusedListed++
				ev.unusedSetup += at.Sub(c.DialedAt)
			}
		}
		if c.Abandoned && !ev.failedUnconnected(c.DialedFor) {
			// The Transport cancelled a dial or handshake no request
			// waited for any more (it closes its idle connections at the
			// end of a phase, which cancels such dials), and the request
			// it was started for got another connection: nothing failed.
			// (One whose request failed without a connection, the connect
			// hanging say, would most likely have failed too.)
			conn.DialAbandoned = true
			rep.DialsAbandoned++
			if conn.DialError != "" {
				conn.DialError = ""
				rep.DialErrors--
			}
		}
		rep.Connections = append(rep.Connections, conn)
		if c.Requests > 0 && c.Proto != "" {
			rep.Protocols[c.Proto]++
		}
		if c.TLSVersion != "" {
			tlsSum.Connections++
			tlsSum.Versions[c.TLSVersion]++
			if c.TLSResumed {
				tlsSum.Resumed++
			}
			// A handshake could resume a session once another had
			// finished before it began; one that resumed could.
			if c.TLSResumed || (!firstDone.IsZero() && firstDone.Before(handshakeStart(c))) {
				tlsSum.Resumable++
			}
			if tlsSum.Connections == 1 {
				tlsSum.ALPN = alpnOf(c)
			}
		}
	}
	if pc := ev.perConn(); pc.conns > 0 {
		rep.PerConn.Min, rep.PerConn.Max = pc.min, pc.max
		rep.PerConn.Mean = float64(pc.answered) / float64(pc.conns)
	}
	if tlsSum.Connections > 0 {
		rep.TLS = &tlsSum
	}
}

// announcedByResponse reports whether a close reason is one a response
// announced (so that the response's status is known).
func announcedByResponse(r pool.CloseReason) bool {
	return r == vocab.ReasonConnectionClose || r == vocab.ReasonHTTP10
}

// handshakeStart returns when c's TLS handshake began: when its TCP
// connection was up, or when it was dialed if the dial made the handshake.
func handshakeStart(c pool.Conn) time.Time {
	for _, h := range c.History {
		if h.State == vocab.StateHandshake {
			return h.At
		}
	}
	return c.DialedAt
}

func alpnOf(c pool.Conn) string {
	if c.Proto == "h2" {
		return "h2"
	}
	if strings.HasPrefix(c.Proto, "HTTP/1") {
		return "http/1.1"
	}
	return ""
}

// openedAt returns when c first became usable (idle or active).
func openedAt(c pool.Conn) (time.Time, bool) {
	for _, h := range c.History {
		if h.State == vocab.StateIdle || h.State == vocab.StateActive {
			return h.At, true
		}
	}
	return time.Time{}, false
}

// idleBeforeClose returns how long c had been idle when it was closed.
func idleBeforeClose(c pool.Conn) time.Duration {
	var idleAt time.Time
	for _, h := range c.History {
		if h.State == vocab.StateIdle {
			idleAt = h.At
		}
	}
	if idleAt.IsZero() || c.ClosedAt.Before(idleAt) {
		return 0
	}
	return c.ClosedAt.Sub(idleAt)
}

// unusable returns the error for a main run in which no request got a
// response.
func (pr *prober) unusable(rep *Result) *UnusableError {
	e := &UnusableError{Sent: rep.Requests, Failed: rep.Requests}
	best := -1
	for _, f := range rep.Failures {
		if f.Count > best {
			best = f.Count
			e.Class, e.Stage, e.Err = f.Class, f.Stage, f.Error
		}
	}
	return e
}

// errorText is the text of tl's outcome error for a report: redacted, on
// one line, and said plainly where net/http's is obscure.
func errorText(tl *httptrace.Timeline) string {
	if tl.Outcome.Err == nil {
		return ""
	}
	msg := oneLine(tl.RedactError(tl.Outcome.Err))
	if strings.HasPrefix(msg, "readLoopPeekFailLocked") {
		// net/http's readLoop found bytes on the connection before any
		// request was written on it (it logs them as an "Unsolicited
		// response") and gave the connection up.
		return "the server sent data before the request was written (not HTTP, or a protocol that speaks first): " + msg
	}
	return msg
}

// oneLine makes s fit on one line.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return redact.Printable(strings.ReplaceAll(s, "\n", " "))
}
