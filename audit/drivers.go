package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/pool"
)

// This file interprets a scenario's steps in process: what the caller does,
// through the pool under audit and, for a retry contract, the retry layer.

// The paths of the scenario's fault server besides the faulted one.
const (
	warmPath = "/warm" // the warm-ups of a scenario that warms aside
	holdPath = "/hold" // the first caller's request of second-caller
)

// serverOptions returns the fault server's options for s: TLS for an
// HTTP/2 scenario, the raw HTTP/2 server where s needs it, and events to
// observe its connections.
func serverOptions(s *Scenario, sc *serverConns) []faultserver.Option {
	opts := []faultserver.Option{faultserver.OnConnEvent(sc.observe)}
	switch {
	case s.Listener == ListenRawHTTP2:
		opts = append(opts, faultserver.TLS(), faultserver.RawHTTP2())
	case s.Proto == HTTP2:
		opts = append(opts, faultserver.TLS())
	}
	return opts
}

// setUpFault readies the faulted URL of s: its fault at the fault path, or
// a listener below HTTP in its place, and the paths its steps use.
func setUpFault(s *Scenario, e *env) error {
	switch s.Listener {
	case ListenTLSStall:
		return tlsStall(e)
	case ListenConnectHang:
		return connectHang(e)
	case ListenClosedPort:
		return closedPort(e)
	}
	if s.Serve == nil {
		return errors.New("the scenario has no fault to serve")
	}
	e.Server.Handle(faultPath, s.Serve)
	if s.WarmAside {
		e.Server.Handle(warmPath, faultserver.OK{})
	}
	if s.Steps == StepsSecondCaller {
		e.Server.Handle(holdPath, holdFault(s.Policy.PoolAcquireTimeout))
	}
	return nil
}

// holdFault is what holds the pool's one connection while a second caller
// waits for it, acquire long: a body that trickles for a second past it, a
// byte every holdEvery, so that no read bound of the client's (a header
// timeout, a body read interval) ends the hold before the wait does.
func holdFault(acquire time.Duration) faultserver.Fault {
	return faultserver.Trickle{Bytes: int((acquire+time.Second)/holdEvery) + 1, Interval: holdEvery}
}

// holdEvery is how often the hold's body sends a byte.
const holdEvery = 50 * time.Millisecond

// driver returns what the caller does in s, as its steps say.
func driver(s *Scenario) func(context.Context, *env) error {
	call := request
	switch {
	case s.Contract != "":
		call = retried
	case s.Policy.AttemptTimeout > 0:
		call = withDeadline(s.Policy.AttemptTimeout)
	}
	switch s.Steps {
	case StepsWarmThenRequest:
		return warmThen(call)
	case StepsCancelWhenEntered:
		if s.Contract != "" {
			return cancelRetried(retried)
		}
		return cancelInHandler
	case StepsSecondCaller:
		return secondCaller
	case StepsReadThenClose:
		return earlyClose
	case StepsWarmCloseThenRequest:
		return warmThen(closeThen(call))
	case StepsWarmThenHeldBody:
		return func(context.Context, *env) error {
			return errors.New("the held-body steps are taken by connaudit serve's kits only")
		}
	case StepsCancelWhileWaiting:
		return cancelWaitingForConn
	case StepsLeaveBodyOpen:
		return unclosedBody
	}
	return call
}

// newRequest returns the scenario's faulted request, with body, if any.
func (e *env) newRequest(ctx context.Context, body io.Reader) (*http.Request, error) {
	r := e.scenario.Request
	if body == nil && r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method(), e.url(), body)
	if err != nil {
		return nil, err
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.IdempotencyKey != "" {
		// With KeyPerAttempt the retry layer's round trips get new ones.
		req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	}
	return req, nil
}

// request makes the faulted request, reads its body to the end and closes
// it. The outcome is in the request's timeline.
func request(ctx context.Context, e *env) error {
	req, err := e.newRequest(ctx, nil)
	if err != nil {
		return err
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// withDeadline makes the faulted request with a deadline of its own, d
// from the moment the client has written the request and the server's
// handler was entered (or half the transport's ResponseHeaderTimeout, if
// that is no longer): the request ends as a context's deadline does, its
// context cancelled with cause context.DeadlineExceeded. Started at the
// request's start instead, the deadline would also cover the dial and the
// TLS handshake, and a machine that stalls for longer than d before the
// request is written would end it at another stage.
func withDeadline(d time.Duration) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		limit := d
		if rht := e.Pool.Transport().ResponseHeaderTimeout; rht > 0 && rht <= d {
			limit = rht / 2
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		inHandler := e.inHandler(ctx)
		go func() {
			if !inHandler() {
				return
			}
			t := time.NewTimer(limit)
			defer t.Stop()
			select {
			case <-t.C:
				cancel(context.DeadlineExceeded)
			case <-ctx.Done():
			}
		}()
		return request(ctx, e)
	}
}

// cancelInHandler cancels the faulted request once the server signals that
// its handler was entered and the client recorded the request as written.
func cancelInHandler(ctx context.Context, e *env) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inHandler := e.inHandler(ctx)
	go func() {
		if inHandler() {
			cancel()
		}
	}()
	return request(ctx, e)
}

// inHandler subscribes, before the faulted request starts, to the server's
// entering its handler and the client's recording the request as written.
// The function it returns waits for both and reports whether they came
// before ctx ended.
func (e *env) inHandler(ctx context.Context) func() bool {
	entered := e.Server.Entered(faultPath)
	wrote := e.signals.on(httptrace.KindWroteRequest)
	return func() bool {
		for _, ch := range []<-chan struct{}{entered, wrote} {
			select {
			case <-ch:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
}

// cancelWaitingForConn occupies the pool's one connection with a request
// that hangs, then cancels a second request while it waits for the pool.
func cancelWaitingForConn(ctx context.Context, e *env) error {
	e.Server.Handle("/hang", faultserver.Hang{})
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		if resp, err := e.get(hctx, e.Target+"/hang"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-e.Server.Entered("/hang"):
	case <-ctx.Done():
		return errors.New("the occupying request never reached the server")
	}
	e.markFaulted()
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	fdone := make(chan struct{})
	go func() {
		defer close(fdone)
		request(fctx, e)
	}()
	err := e.Pool.WaitFor(ctx, func(s pool.Stats) bool { return s.Waiting >= 1 })
	fcancel()
	<-fdone
	hcancel()
	<-hdone
	if err != nil {
		return fmt.Errorf("the second request never waited for the pool: %w", err)
	}
	select {
	case <-e.Server.CancelObserved("/hang"):
	case <-ctx.Done():
	}
	return nil
}

// warmThen makes the scenario's warm-ups, each read and closed, to leave a
// kept-alive connection — to the faulted URL, or to the warm path aside
// (WarmAside) — then the faulted request by drive.
func warmThen(drive func(context.Context, *env) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		path := faultPath
		if e.scenario.WarmAside {
			path = warmPath
		}
		for i := range max(1, e.scenario.Warm) {
			resp, err := e.get(ctx, e.Target+path)
			if err != nil {
				return fmt.Errorf("warm-up request %d: %w", i+1, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		e.markFaulted()
		return drive(ctx, e)
	}
}

// earlyClose reads the scenario's ReadBytes of the body and closes it.
func earlyClose(ctx context.Context, e *env) error {
	resp, err := e.get(ctx, e.url())
	if err != nil {
		return nil
	}
	io.CopyN(io.Discard, resp.Body, int64(e.scenario.ReadBytes))
	resp.Body.Close()
	return nil
}

// closeThen has the server close the warm-up's connection as the scenario
// says ("fin", "rst"; "idle" and "limit": the server by itself, its idle
// timeout after the scenario's Wait, its request limit at once), waits
// until the server has closed it and seen the
// client close its side (a second at most after the server's close), then
// makes the faulted request by drive.
func closeThen(drive func(context.Context, *env) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		id, err := e.closeWarm()
		if err != nil {
			return err
		}
		wait := clientCloseWait
		if e.scenario.Close == "idle" {
			wait += e.scenario.Wait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		e.serverConns.waitClosed(wctx, id)
		cancel()
		return drive(ctx, e)
	}
}

// clientCloseWait bounds the wait for the client to close its side of a
// connection the server closed with a FIN.
const clientCloseWait = time.Second

// closeWarm closes the connection the warm-up came on, as the scenario
// says, and returns its id (the server's); "idle" and "limit" leave the
// close to the server.
func (e *env) closeWarm() (uint64, error) {
	id, ok := e.serverConns.first()
	if !ok {
		return 0, errors.New("the warm-up request reached no connection of the server")
	}
	switch e.scenario.Close {
	case "rst":
		e.Server.ResetConn(id)
	case "fin":
		e.Server.CloseWriteConn(id)
	case "idle", "limit":
		// The server closes it by itself.
	default:
		return 0, fmt.Errorf("unknown close %q", e.scenario.Close)
	}
	return id, nil
}

// serverConns follows the fault server's connections: which carried the
// requests for the fault path, in order, and which are closed.
type serverConns struct {
	mu       sync.Mutex
	order    []uint64          // each fault-path request's connection (at most maxRecorded)
	accepted int               // connections accepted
	closed   map[uint64]string // who closed each closed connection first
	changes  notify.Changes
}

// maxRecorded bounds the requests serverConns records.
const maxRecorded = 1 << 12

// observe is the fault server's connection event hook.
func (c *serverConns) observe(ev faultserver.ConnEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Kind {
	case faultserver.ConnAccepted:
		c.accepted++
	case faultserver.ConnRequest:
		if ev.Path == faultPath && len(c.order) < maxRecorded {
			c.order = append(c.order, ev.Conn)
		}
	case faultserver.ConnClosed:
		if c.closed == nil {
			c.closed = map[uint64]string{}
		}
		c.closed[ev.Conn] = ev.ClosedBy
	}
	c.changes.Signal()
}

// open returns how many of the server's connections are open.
func (c *serverConns) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted - len(c.closed)
}

// first returns the connection of the first request for the fault path.
func (c *serverConns) first() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) == 0 {
		return 0, false
	}
	return c.order[0], true
}

// waitClosed waits until the connection id is closed, or ctx ends.
func (c *serverConns) waitClosed(ctx context.Context, id uint64) error {
	return notify.Wait(ctx, &c.mu, &c.changes, func() bool {
		_, ok := c.closed[id]
		return ok
	})
}

// secondCaller holds the pool's one connection with a request the server
// never answers, then makes the faulted request as a second caller that
// waits for the pool at most the policy's PoolAcquireTimeout (a context
// deadline: no http.Transport field bounds a wait for a connection), and
// ends the first request once the second has ended.
func secondCaller(ctx context.Context, e *env) error {
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		if resp, err := e.get(hctx, e.Target+holdPath); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-e.Server.Entered(holdPath):
	case <-ctx.Done():
		hcancel()
		<-hdone
		return errors.New("the first caller's request never reached the server")
	}
	e.markFaulted()
	fctx, fcancel := context.WithTimeout(ctx, e.scenario.Policy.PoolAcquireTimeout)
	err := request(fctx, e)
	fcancel()
	hcancel()
	<-hdone
	return err
}

// unclosedBody leaves the body of the faulted request unread and unclosed,
// checks that the pool finds the leak and names the goroutines it pins,
// and whether /ok waits for the pinned connection; then it closes the body.
func unclosedBody(ctx context.Context, e *env) error {
	resp, err := e.get(ctx, e.url())
	if err != nil {
		return fmt.Errorf("the request to leak failed: %w", err)
	}
	defer resp.Body.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	err = e.Pool.Check(cctx)
	cancel()
	if err != nil {
		e.obs.LeakFound = append(e.obs.LeakFound, splitErrors(err)...)
	}
	// The goroutines net/http runs now are shown, not counted as found:
	// a healthy HTTP/2 connection runs them too. One note lists them all.
	if gs := leaks.Labeled(scenarioLabel, e.label); len(gs) > 0 {
		e.obs.Notes = append(e.obs.Notes, "the scenario's goroutines while it holds the body open on purpose "+
			"(not leaks): "+strings.Join(gs, "; "))
	}

	// Does /ok wait for the pinned connection? Over HTTP/2 the connection
	// multiplexes: /ok must complete while the body stays open. Over
	// HTTP/1 it must queue for the one connection and complete only once
	// the body is closed.
	okctx, okcancel := context.WithCancel(ctx)
	defer okcancel()
	okdone := make(chan error, 1)
	go func() {
		resp, err := e.get(okctx, e.Target+okPath)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		okdone <- err
	}()
	var okErr error
	if resp.ProtoMajor >= 2 {
		select {
		case okErr = <-okdone:
		case <-ctx.Done():
			e.obs.BlockedOK = true
			okcancel()
			okErr = <-okdone
		}
		resp.Body.Close()
	} else {
		wctx, wcancel := context.WithCancel(ctx)
		queued := make(chan error, 1)
		go func() {
			queued <- e.Pool.WaitFor(wctx, func(s pool.Stats) bool { return s.Waiting >= 1 && s.Dialing == 0 })
		}()
		finished := false
		select {
		case okErr = <-okdone:
			finished = true // /ok did not wait for the pinned connection
		case err := <-queued:
			select {
			case okErr = <-okdone:
				finished = true
			default:
				e.obs.BlockedOK = err == nil
			}
		}
		wcancel()
		resp.Body.Close()
		if !finished {
			select {
			case okErr = <-okdone:
			case <-ctx.Done():
				okcancel()
				okErr = <-okdone
			}
		}
	}
	if okErr != nil {
		return fmt.Errorf("/ok after the body was closed: %w", okErr)
	}
	return nil
}

// raw returns a setup that points the faulted request at a listener below
// HTTP.
func connectHang(e *env) error {
	h, err := faultserver.NewConnectHang()
	if err != nil {
		return err
	}
	e.Target = h.URL()
	e.cleanups = append(e.cleanups, func() { h.Close() })
	return nil
}

func tlsStall(e *env) error {
	s, err := faultserver.NewTLSStall()
	if err != nil {
		return err
	}
	e.Target = s.URL()
	e.accepted = s.ConnsAccepted
	e.cleanups = append(e.cleanups, func() { s.Close() })
	return nil
}

func closedPort(e *env) error {
	addr, release, err := loopback.ClosedPort()
	if err != nil {
		return err
	}
	e.Target = "http://" + addr
	e.cleanups = append(e.cleanups, release)
	return nil
}

// retried sends the faulted request through the retry layer under audit,
// over a copy of the audited pool's client, and reads and closes what it
// returns.
func retried(ctx context.Context, e *env) error {
	r := e.scenario.Request
	req, err := e.newRequest(ctx, nil)
	if err != nil {
		return err
	}
	client := *e.Client // the layer may set fields of its client
	if r.KeyPerAttempt {
		client.Transport = &keyStamper{base: client.Transport, key: r.IdempotencyKey}
	}
	resp, err := e.callRetry(ctx, &client, req)
	e.called, e.callErr = true, err
	var got []byte
	status := 0
	if resp != nil && resp.Body != nil {
		status = resp.StatusCode
		got, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The report comes with the 200; another status is a mismatch of its
	// own.
	if r.Reported != "" && err == nil && status == http.StatusOK && string(got) != r.Reported {
		return fmt.Errorf("the caller read the body %q, where the server reported %q", got, r.Reported)
	}
	return nil
}

// cancelRetried runs drive, a retried call, and cancels it once the
// server's handler was entered and the client recorded the request as
// written.
func cancelRetried(drive func(context.Context, *env) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		ctx, cancel := context.WithCancel(ctx)
		inHandler := e.inHandler(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if inHandler() {
				cancel()
			}
		}()
		err := drive(ctx, e)
		cancel()
		<-done
		return err
	}
}

// callRetry runs the retry layer; a layer that panics fails the call.
func (e *env) callRetry(ctx context.Context, c *http.Client, req *http.Request) (resp *http.Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, fmt.Errorf("audit: the retry layer panicked: %v", v)
		}
	}()
	return e.retry(ctx, c, req)
}

// keyStamper sets a new Idempotency-Key on every round trip: key-attempt-1,
// key-attempt-2, …
type keyStamper struct {
	base http.RoundTripper
	key  string
	n    atomic.Int64
}

func (k *keyStamper) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Idempotency-Key", fmt.Sprintf("%s-attempt-%d", k.key, k.n.Add(1)))
	return k.base.RoundTrip(r)
}
