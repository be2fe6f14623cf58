package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/pool"
)

// handle returns a setup that serves f at the fault path.
func handle(f faultserver.Fault) func(*Env) error {
	return func(e *Env) error {
		e.Server.Handle(faultPath, f)
		return nil
	}
}

// single makes one GET of the faulted URL, reads its body to the end and
// closes it. The outcome is in the request's timeline.
func single(ctx context.Context, e *Env) error {
	resp, err := e.get(ctx, e.url())
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
func withDeadline(d time.Duration) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
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
		return single(ctx, e)
	}
}

// cancelInHandler cancels the faulted request once the server signals that
// its handler was entered and the client recorded the request as written.
func cancelInHandler(ctx context.Context, e *Env) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inHandler := e.inHandler(ctx)
	go func() {
		if inHandler() {
			cancel()
		}
	}()
	return single(ctx, e)
}

// inHandler subscribes, before the faulted request starts, to the server's
// entering its handler and the client's recording the request as written.
// The function it returns waits for both and reports whether they came
// before ctx ended.
func (e *Env) inHandler(ctx context.Context) func() bool {
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
func cancelWaitingForConn(ctx context.Context, e *Env) error {
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
		single(fctx, e)
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

// connected makes one request to /ok to leave a kept-alive connection,
// then the faulted request: a contract whose bound is short beside a
// dial's time on a loaded machine (an attempt limit of 150ms) is judged on
// the attempt, not on how long the connection took to make.
func connected(drive func(context.Context, *Env) error) func(context.Context, *Env) error {
	return warmed(okPath, drive)
}

// warmThen makes one request to the faulted URL to leave a kept-alive
// connection, then the faulted request.
func warmThen(drive func(context.Context, *Env) error) func(context.Context, *Env) error {
	return warmed(faultPath, drive)
}

// warmed makes one request to path, read and closed, then the faulted
// request.
func warmed(path string, drive func(context.Context, *Env) error) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		resp, err := e.get(ctx, e.Target+path)
		if err != nil {
			return fmt.Errorf("warm-up request: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e.markFaulted()
		return drive(ctx, e)
	}
}

// earlyClose reads n bytes of the body and closes it.
func earlyClose(n int64) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		resp, err := e.get(ctx, e.url())
		if err != nil {
			return nil
		}
		io.CopyN(io.Discard, resp.Body, n)
		resp.Body.Close()
		return nil
	}
}

// unclosedBody leaves the body of the faulted request unread and unclosed,
// checks that the pool finds the leak and names the goroutines it pins,
// and whether /ok waits for the pinned connection; then it closes the body.
func unclosedBody(ctx context.Context, e *Env) error {
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
	// a healthy HTTP/2 connection runs them too.
	for _, g := range leaks.Labeled(scenarioLabel, e.label) {
		e.obs.Notes = append(e.obs.Notes, "goroutine of the body held open on purpose (not a leak): "+g)
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
func connectHang(e *Env) error {
	h, err := faultserver.NewConnectHang()
	if err != nil {
		return err
	}
	e.Target = h.URL()
	e.cleanups = append(e.cleanups, func() { h.Close() })
	return nil
}

func tlsStall(e *Env) error {
	s, err := faultserver.NewTLSStall()
	if err != nil {
		return err
	}
	e.Target = s.URL()
	e.accepted = s.ConnsAccepted
	e.cleanups = append(e.cleanups, func() { s.Close() })
	return nil
}

func closedPort(e *Env) error {
	addr, err := loopback.ClosedPort()
	if err != nil {
		return err
	}
	e.Target = "http://" + addr
	return nil
}

// call is the request a retry contract makes.
type call struct {
	method string
	key    string // Idempotency-Key set by the caller
	// keyPerTry gives every attempt a new key instead, as a client that
	// makes the key inside its retry loop does.
	keyPerTry bool
	// body, when set, is the body the caller must read in a 200 it gets:
	// what the server reported.
	body string
}

// retried sends the faulted request through the retry layer under audit,
// over a copy of the audited pool's client, and reads and closes what it
// returns.
func retried(c call) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		var body io.Reader
		if c.method != http.MethodGet && c.method != http.MethodHead {
			body = strings.NewReader(`{"order":7}`)
		}
		req, err := http.NewRequestWithContext(ctx, c.method, e.url(), body)
		if err != nil {
			return err
		}
		if c.key != "" {
			req.Header.Set("Idempotency-Key", c.key)
		}
		client := *e.Client // the layer may set fields of its client
		if c.keyPerTry {
			client.Transport = &keyStamper{base: client.Transport, key: c.key}
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
		// The report comes with the 200; another status is a mismatch of
		// its own.
		if c.body != "" && err == nil && status == http.StatusOK && string(got) != c.body {
			return fmt.Errorf("the caller read the body %q, where the server reported %q", got, c.body)
		}
		return nil
	}
}

// cancelRetried runs drive, a retried call, and cancels it once the
// server's handler was entered and the client recorded the request as
// written.
func cancelRetried(drive func(context.Context, *Env) error) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
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
func (e *Env) callRetry(ctx context.Context, c *http.Client, req *http.Request) (resp *http.Response, err error) {
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
