package audit

import (
	"net/http"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
	"golang.org/x/net/http2"
)

// The bounds of the catalogue: short, so that the whole catalogue runs in
// seconds, and far from each other, so that the bound under audit always
// fires first.
const (
	boundShort = 150 * time.Millisecond // header, attempt, connect, TLS and body-idle bounds
	// A trickle lasts longer than its body-idle bound, to show that the
	// bound is not a total deadline, with a byte every fifteenth of it, so
	// that a loaded machine's scheduling delays do not trip it.
	trickleIdle  = time.Second
	trickleEvery = 50 * time.Millisecond
	trickleBytes = 25 // 1.2s in all
	// The body a fault cuts part way: the bytes it promises and those it
	// sends before the cut. The client reads every byte sent: TCP delivers
	// them before the FIN, HTTP/2 the DATA before the RST_STREAM, and
	// net/http hands over what it buffered before the error.
	midBodyLength = 10000
	midBodySend   = 1000
	// earlyRead is how many bytes of a large body the client reads before
	// it closes the body.
	earlyRead = 10
)

func n(v int64) *int64 { return &v }

func reusedFate() *Fate { return &Fate{Reused: true} }

func closedFate(by pool.Closer, reason pool.CloseReason) *Fate {
	return &Fate{ClosedBy: by, Reason: reason}
}

func ok(status int) Expect {
	return Expect{Class: httptrace.ClassOK, Status: status, ClientAttempts: 1, ServerRequests: 1, Dials: n(1)}
}

func failed(class httptrace.Class, stage httptrace.Stage, serverRequests int64) Expect {
	return Expect{Class: class, Stage: stage, ClientAttempts: 1, ServerRequests: serverRequests, Dials: n(1)}
}

func http1Scenarios() []Scenario {
	status := func(code int) Scenario {
		e := ok(code)
		e.Fate = reusedFate()
		return Scenario{Name: "status-" + itoa(code), Proto: HTTP1, Fault: "answers " + itoa(code), Bound: "-",
			Expect: e, setup: handle(faultserver.Status{Code: code}), drive: single}
	}
	okExp := ok(200)
	okExp.Fate = reusedFate()
	rht := failed(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders, 1)
	rht.Fate = closedFate(pool.ClosedByClient, pool.ReasonRequestError)
	rht.CancelObserved = true
	deadline := failed(httptrace.ClassDeadline, httptrace.StageAwaitHeaders, 1)
	deadline.CancelObserved = true
	deadline.Fate = closedFate(pool.ClosedByClient, pool.ReasonRequestError)
	canceled := failed(httptrace.ClassCanceled, httptrace.StageAwaitHeaders, 1)
	canceled.CancelObserved = true
	canceled.HandlersEntered = n(1) // the cancel came once the handler was entered, and nothing resent it
	canceled.Fate = closedFate(pool.ClosedByClient, pool.ReasonRequestError)
	waiting := failed(httptrace.ClassCanceled, httptrace.StagePoolWait, 0)
	waiting.Fate = &Fate{None: true}
	closeBefore := failed(httptrace.ClassServerClosed, httptrace.StageAwaitHeaders, 1)
	closeBefore.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerEOF)
	hidden := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(2), HiddenRetry: true, Fate: reusedFate()}
	reset := failed(httptrace.ClassReset, httptrace.StageAwaitHeaders, 1)
	reset.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerReset)
	truncated := failed(httptrace.ClassBodyTruncated, httptrace.StageBody, 1)
	truncated.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerEOF)
	truncated.BodyBytes = n(midBodySend)
	stall := failed(httptrace.ClassBodyIdleTimeout, httptrace.StageBody, 1)
	stall.CancelObserved = true
	stall.Fate = closedFate(pool.ClosedByClient, pool.ReasonRequestError)
	trickle := ok(200)
	trickle.Fate = reusedFate()
	trickle.BodyAtLeast = trickleEvery * (trickleBytes - 1)
	trickle.BodyBytes = n(trickleBytes)
	early := ok(200)
	early.Fate = closedFate(pool.ClosedByClient, pool.ReasonEarlyBodyClose)
	early.BodyBytes = n(earlyRead)
	unclosed := ok(200)
	unclosed.Dials = n(2) // closing the unread body closes the connection; /ok dials anew
	unclosed.Leak, unclosed.BlocksOK = true, true
	unclosed.Fate = closedFate(pool.ClosedByClient, pool.ReasonEarlyBodyClose)
	connClose := ok(200)
	connClose.Fate = closedFate(pool.ClosedByServer, pool.ReasonConnectionClose)
	tlsStallExp := failed(httptrace.ClassTLSHandshakeTimeout, httptrace.StageTLS, 0)
	tlsStallExp.Fate = closedFate(pool.ClosedByClient, pool.ReasonHandshakeFailed)
	tlsStallExp.ConnsAccepted = n(1) // the connect succeeded; the handshake stalled
	connectTimeout := failed(httptrace.ClassConnectTimeout, httptrace.StageConnect, 0)
	connectTimeout.Fate = &Fate{None: true}
	refused := failed(httptrace.ClassConnectRefused, httptrace.StageConnect, 0)
	refused.Fate = &Fate{None: true}

	return []Scenario{
		{Name: "ok", Proto: HTTP1, Fault: `200 "ok"`, Bound: "-", Expect: okExp, setup: handle(faultserver.OK{}), drive: single},
		status(503), status(500), status(404),
		{Name: "response-header-timeout", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "ResponseHeaderTimeout 150ms",
			Wait: boundShort, Expect: rht, Bounds: []pool.Option{pool.ResponseHeaderTimeout(boundShort)},
			setup: handle(faultserver.Hang{}), drive: single},
		{Name: "attempt-deadline", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "deadline 150ms once the request is written",
			Wait: boundShort, Expect: deadline, setup: handle(faultserver.Hang{}), drive: withDeadline(boundShort)},
		{Name: "cancel-in-handler", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "cancel once the handler is entered",
			Expect: canceled, setup: handle(faultserver.Hang{}), drive: cancelInHandler},
		{Name: "cancel-waiting-for-conn", Proto: HTTP1, Fault: "the one connection is busy", Bound: "cancel the 2nd request while it waits",
			Expect: waiting, setup: handle(faultserver.OK{}), drive: cancelWaitingForConn},
		{Name: "close-before-response", Proto: HTTP1, Fault: "reads the request, closes", Bound: "-",
			Expect: closeBefore, setup: handle(faultserver.CloseBeforeResponse{}), drive: single},
		{Name: "hidden-retry", Proto: HTTP1, Fault: "closes a kept-alive connection after reading its 2nd request", Bound: "GET on a reused connection",
			Expect: hidden, setup: handle(faultserver.CloseBeforeResponse{After: 1}), drive: warmThen(single)},
		{Name: "reset", Proto: HTTP1, Fault: "RST (linger 0) after reading the request", Bound: "-",
			Expect: reset, setup: handle(faultserver.Reset{}), drive: single},
		{Name: "close-mid-body", Proto: HTTP1, Fault: "Content-Length 10000, sends 1000, closes", Bound: "-",
			Expect: truncated, setup: handle(faultserver.CloseMidBody{Length: midBodyLength, Send: midBodySend}), drive: single},
		{Name: "stall-mid-body", Proto: HTTP1, Fault: "sends half the body, stalls", Bound: "body idle 150ms",
			Wait: boundShort, Expect: stall, Bounds: []pool.Option{pool.BodyIdleTimeout(boundShort)},
			setup: handle(faultserver.StallMidBody{Length: 10000, Send: 5000}), drive: single},
		{Name: "trickle-body", Proto: HTTP1, Fault: "a byte every 50ms for 1.2s", Bound: "body idle 1s",
			Wait: trickleEvery * (trickleBytes - 1), Expect: trickle, Bounds: []pool.Option{pool.BodyIdleTimeout(trickleIdle)},
			setup: handle(faultserver.Trickle{Bytes: trickleBytes, Interval: trickleEvery}), drive: single},
		{Name: "early-body-close", Proto: HTTP1, Fault: "1 MiB body", Bound: "client closes after 10 bytes",
			Expect: early, setup: handle(faultserver.LargeBody{Size: 1 << 20}), drive: earlyClose(earlyRead)},
		{Name: "unclosed-body", Proto: HTTP1, Fault: `200 "ok"`, Bound: "body never closed (until the check)",
			Expect: unclosed, setup: handle(faultserver.OK{}), drive: unclosedBody},
		{Name: "connection-close", Proto: HTTP1, Fault: "Connection: close", Bound: "-",
			Expect: connClose, setup: handle(faultserver.ConnectionClose{}), drive: single},
		{Name: "tls-handshake-stall", Proto: HTTP1, Fault: "TCP accept, then silence", Bound: "TLSHandshakeTimeout 150ms",
			Wait: boundShort, Expect: tlsStallExp, Bounds: []pool.Option{pool.TLSHandshakeTimeout(boundShort)},
			setup: tlsStall, drive: single},
		{Name: "connect-hang", Proto: HTTP1, Fault: "accept queue full", Bound: "Dialer.Timeout 150ms",
			Wait: boundShort, Expect: connectTimeout, Bounds: []pool.Option{pool.ConnectTimeout(boundShort)},
			setup: connectHang, drive: single},
		{Name: "connect-refused", Proto: HTTP1, Fault: "closed port", Bound: "-",
			Expect: refused, setup: closedPort, drive: single},
	}
}

func http2Scenarios() []Scenario {
	tlsOpts := []faultserver.Option{faultserver.TLS()}
	rawOpts := []faultserver.Option{faultserver.TLS(), faultserver.RawHTTP2()}
	reused := func(e Expect) Expect {
		e.Fate = reusedFate()
		return e
	}
	status := func(code int) Scenario {
		return Scenario{Name: "h2/status-" + itoa(code), Proto: HTTP2, Fault: "answers " + itoa(code), Bound: "-",
			Expect: reused(ok(code)), server: tlsOpts, setup: handle(faultserver.Status{Code: code}), drive: single}
	}
	okExp := reused(ok(200))
	rht := reused(failed(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders, 1))
	rht.CancelObserved = true
	deadline := reused(failed(httptrace.ClassDeadline, httptrace.StageAwaitHeaders, 1))
	deadline.CancelObserved = true
	canceled := reused(failed(httptrace.ClassCanceled, httptrace.StageAwaitHeaders, 1))
	canceled.CancelObserved = true
	canceled.HandlersEntered = n(1)
	streamReset := reused(failed(httptrace.ClassStreamReset, httptrace.StageAwaitHeaders, 1))
	midBody := reused(failed(httptrace.ClassStreamReset, httptrace.StageBody, 1))
	midBody.BodyBytes = n(midBodySend)
	stall := reused(failed(httptrace.ClassBodyIdleTimeout, httptrace.StageBody, 1))
	stall.CancelObserved = true
	trickle := reused(ok(200))
	trickle.BodyAtLeast = trickleEvery * (trickleBytes - 1)
	trickle.BodyBytes = n(trickleBytes)
	early := reused(ok(200))
	early.BodyBytes = n(earlyRead)
	unclosed := reused(ok(200))
	unclosed.Leak = true
	closeBefore := failed(httptrace.ClassServerClosed, httptrace.StageAwaitHeaders, 1)
	closeBefore.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerEOF)
	connClose := ok(200)
	connClose.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerGoAway)
	goaway := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(2), HiddenRetry: true, Fate: reusedFate()}
	refused := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(1), HiddenRetry: true, Fate: reusedFate()}
	return []Scenario{
		{Name: "h2/ok", Proto: HTTP2, Fault: `200 "ok"`, Bound: "-", Expect: okExp, server: tlsOpts,
			setup: handle(faultserver.OK{}), drive: single},
		status(503), status(500), status(404),
		{Name: "h2/response-header-timeout", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "ResponseHeaderTimeout 150ms",
			Wait: boundShort, Expect: rht, server: tlsOpts, Bounds: []pool.Option{pool.ResponseHeaderTimeout(boundShort)},
			setup: handle(faultserver.Hang{}), drive: single},
		{Name: "h2/attempt-deadline", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "deadline 150ms once the request is written",
			Wait: boundShort, Expect: deadline, server: tlsOpts, setup: handle(faultserver.Hang{}), drive: withDeadline(boundShort)},
		{Name: "h2/cancel-in-handler", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "cancel once the handler is entered",
			Expect: canceled, server: tlsOpts, setup: handle(faultserver.Hang{}), drive: cancelInHandler},
		{Name: "h2/close-before-response", Proto: HTTP2, Fault: "reads the request, closes the connection", Bound: "-",
			Expect: closeBefore, server: tlsOpts, setup: handle(faultserver.CloseBeforeResponse{}), drive: single},
		{Name: "h2/connection-close", Proto: HTTP2, Fault: "Connection: close (GOAWAY, close when idle)", Bound: "-",
			Expect: connClose, server: tlsOpts, setup: handle(faultserver.ConnectionClose{}), drive: single},
		{Name: "h2/reset", Proto: HTTP2, Fault: "RST_STREAM(INTERNAL_ERROR)", Bound: "-", Expect: streamReset, server: tlsOpts,
			setup: handle(faultserver.Reset{}), drive: single},
		{Name: "h2/close-mid-body", Proto: HTTP2, Fault: "sends 1000 of 10000 bytes, resets the stream", Bound: "-", Expect: midBody,
			server: tlsOpts, setup: handle(faultserver.CloseMidBody{Length: midBodyLength, Send: midBodySend}), drive: single},
		{Name: "h2/stall-mid-body", Proto: HTTP2, Fault: "sends half the body, stalls", Bound: "body idle 150ms",
			Wait: boundShort, Expect: stall, server: tlsOpts, Bounds: []pool.Option{pool.BodyIdleTimeout(boundShort)},
			setup: handle(faultserver.StallMidBody{Length: 10000, Send: 5000}), drive: single},
		{Name: "h2/trickle-body", Proto: HTTP2, Fault: "a byte every 50ms for 1.2s", Bound: "body idle 1s",
			Wait: trickleEvery * (trickleBytes - 1), Expect: trickle, server: tlsOpts, Bounds: []pool.Option{pool.BodyIdleTimeout(trickleIdle)},
			setup: handle(faultserver.Trickle{Bytes: trickleBytes, Interval: trickleEvery}), drive: single},
		{Name: "h2/early-body-close", Proto: HTTP2, Fault: "1 MiB body", Bound: "client closes after 10 bytes",
			Expect: early, server: tlsOpts, setup: handle(faultserver.LargeBody{Size: 1 << 20}), drive: earlyClose(earlyRead)},
		{Name: "h2/unclosed-body", Proto: HTTP2, Fault: `200 "ok"`, Bound: "body never closed (until the check)",
			Expect: unclosed, server: tlsOpts, setup: handle(faultserver.OK{}), drive: unclosedBody},
		{Name: "h2/goaway", Proto: HTTP2, Fault: "GOAWAY below the request's stream", Bound: "-", Expect: goaway, server: rawOpts,
			setup: handle(faultserver.Sequence{Faults: []faultserver.Fault{faultserver.GoAway{}, faultserver.OK{}}}), drive: single},
		{Name: "h2/refused-stream", Proto: HTTP2, Fault: "RST_STREAM(REFUSED_STREAM), then 200", Bound: "-", Expect: refused, server: rawOpts,
			setup: handle(faultserver.Sequence{Faults: []faultserver.Fault{faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{}}}),
			drive: single},
	}
}

// The retry contracts. Each holds one contract of the retry layer under
// audit (package retry's by default, or the caller's: WithRetry), at the
// reference numbers where time costs nothing and scaled down where the
// catalogue would wait (retry's TestSeed holds every one at the reference
// numbers, in virtual time). The contracts' policy: only 503 is retried,
// at most 2 retries, a fixed delay; the attempt limit bounds one attempt
// through reading the body and restarts with each retry; the total budget
// bounds all attempts and delays.
const (
	// A7 and A10, at Reactor Netty's 250 ms: its responseTimeout is an interval
	// between reads, which Go splits in two: the wait for the response
	// headers (ResponseHeaderTimeout) and the wait for each read of the
	// body (pool.BodyIdleTimeout).
	readInterval = 250 * time.Millisecond
	// A8, scaled by 0.3 from 1 s, 1.5 s, 1 s: two immediate 503s, and
	// the budget ends 150 ms into the second delay.
	budgetAttempt = 300 * time.Millisecond
	budgetTotal   = 450 * time.Millisecond
	budgetDelay   = 300 * time.Millisecond
	// A9, scaled from 400, 500, 200 ms: each attempt answers after
	// slowAnswer, well within the attempt limit, but two of them and the
	// delay exceed it.
	slowAnswer  = 150 * time.Millisecond
	slowAttempt = 300 * time.Millisecond
	slowDelay   = 100 * time.Millisecond
)

func retryScenarios() []Scenario {
	base := retry.Policy{AttemptTimeout: 3 * time.Second, TotalTimeout: 8 * time.Second, MaxRetries: 2, Delay: 10 * time.Millisecond}
	with := func(edit func(*retry.Policy)) retry.Policy {
		p := base
		edit(&p)
		return p
	}
	seq := func(f ...faultserver.Fault) func(*Env) error { return handle(faultserver.Sequence{Faults: f}) }
	s503 := faultserver.Status{Code: 503}
	get := retried(call{method: http.MethodGet})
	// Every attempt of a retried request goes over the one kept-alive
	// connection, which serves /ok afterwards.
	exp := func(class httptrace.Class, status, attempts int, server int64) Expect {
		return Expect{Class: class, Status: status, ClientAttempts: attempts, ServerRequests: server, Dials: n(1), Fate: reusedFate()}
	}
	// A request that timed out: the server sees it go, the client closes
	// the connection.
	timedOut := func(class httptrace.Class, stage httptrace.Stage) Expect {
		e := exp(class, 0, 1, 1)
		e.Stage, e.CancelObserved = stage, true
		e.Fate = closedFate(pool.ClosedByClient, pool.ReasonRequestError)
		return e
	}
	bodyStalled := timedOut(httptrace.ClassBodyIdleTimeout, httptrace.StageBody)
	bodyStalled.BodyBytes = n(midBodySend)
	closed := exp(httptrace.ClassServerClosed, 0, 1, 1)
	closed.Stage = httptrace.StageAwaitHeaders
	closed.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerEOF)
	canceled := timedOut(httptrace.ClassCanceled, httptrace.StageAwaitHeaders)
	canceled.HandlersEntered = n(1)
	budget := exp(httptrace.ClassDeadline, 0, 2, 2)
	// W1 and W2 retry a POST once with no delay, as Reactor's retry(1)
	// does.
	postOnce := func(p *retry.Policy) { p.MaxRetries, p.Delay = 1, 0 }
	unsafe := with(func(p *retry.Policy) { postOnce(p); p.UnsafeRetryNonIdempotent = true })
	keyed := with(func(p *retry.Policy) { postOnce(p); p.RetryIdempotencyKey = true })
	postExp := func(attempts int, server, writes int64, status int) Expect {
		e := exp(httptrace.ClassOK, status, attempts, server)
		e.Writes = n(writes)
		return e
	}
	hidden := exp(httptrace.ClassOK, 200, 1, 2)
	hidden.HiddenRetry, hidden.Dials = true, n(2)
	// The second answer reports the writes the server committed, which
	// the caller must read in the body it gets.
	writes := seq(faultserver.Write{Status: 503}, faultserver.Write{Status: 200, Report: true})
	const bound = "503 only, 2 retries 10ms apart"
	return []Scenario{
		{Name: "retry/immediate-success", Contract: "A1", Proto: HTTP1, Fault: `200 "ok"`, Bound: bound,
			Expect: exp(httptrace.ClassOK, 200, 1, 1), setup: handle(faultserver.OK{}), drive: get, policy: base, subject: "200"},
		{Name: "retry/503-503-ok", Contract: "A2", Proto: HTTP1, Fault: "503, 503, 200", Bound: bound,
			Wait: 2 * base.Delay, Expect: exp(httptrace.ClassOK, 200, 3, 3), setup: seq(s503, s503, faultserver.OK{}), drive: get,
			policy: base, subject: "503"},
		{Name: "retry/always-503", Contract: "A3", Proto: HTTP1, Fault: "503 every time", Bound: bound,
			Wait: 2 * base.Delay, Expect: exp(httptrace.ClassOK, 503, 3, 3), setup: handle(s503), drive: get, policy: base, subject: "503"},
		{Name: "retry/404", Contract: "A4", Proto: HTTP1, Fault: "answers 404", Bound: bound,
			Expect: exp(httptrace.ClassOK, 404, 1, 1), setup: handle(faultserver.Status{Code: 404}), drive: get, policy: base, subject: "404"},
		{Name: "retry/500", Contract: "A5", Proto: HTTP1, Fault: "answers 500", Bound: bound,
			Expect: exp(httptrace.ClassOK, 500, 1, 1), setup: handle(faultserver.Status{Code: 500}), drive: get, policy: base, subject: "500"},
		{Name: "retry/attempt-deadline", Contract: "A6", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "attempt limit 150ms",
			Wait: boundShort, Expect: timedOut(httptrace.ClassDeadline, httptrace.StageAwaitHeaders), setup: handle(faultserver.Hang{}),
			drive: connected(get), policy: with(func(p *retry.Policy) { p.AttemptTimeout = boundShort }), subject: "the attempt timeout"},
		{Name: "retry/response-header-timeout", Contract: "A7", Proto: HTTP1, Fault: "handler entered, never writes",
			Bound: "header wait (ResponseHeaderTimeout) 250ms < attempt limit 3s", Wait: readInterval,
			Expect: timedOut(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders),
			Bounds: []pool.Option{pool.ResponseHeaderTimeout(readInterval)}, setup: handle(faultserver.Hang{}), drive: get,
			policy: base, subject: "the header wait timeout"},
		{Name: "retry/total-budget", Contract: "A8", Proto: HTTP1, Fault: "503 at once, every time",
			Bound: "attempt 300ms, budget 450ms, delay 300ms", Wait: budgetTotal, Expect: budget, setup: handle(s503), drive: connected(get),
			policy: with(func(p *retry.Policy) {
				p.AttemptTimeout, p.TotalTimeout, p.Delay = budgetAttempt, budgetTotal, budgetDelay
			}), subject: "503"},
		{Name: "retry/attempt-limit-restarts", Contract: "A9", Proto: HTTP1, Fault: "503, then 200, each after 150ms",
			Bound: "attempt 300ms, budget 1.2s, delay 100ms", Wait: 2*slowAnswer + slowDelay, Expect: exp(httptrace.ClassOK, 200, 2, 2),
			setup: seq(faultserver.Status{Code: 503, After: slowAnswer}, faultserver.Status{Code: 200, After: slowAnswer}), drive: connected(get),
			policy: with(func(p *retry.Policy) {
				p.AttemptTimeout, p.TotalTimeout, p.Delay = slowAttempt, 4*slowAttempt, slowDelay
			}), subject: "503"},
		{Name: "retry/body-read-interval", Contract: "A10", Proto: HTTP1, Fault: "sends half the body, stalls",
			Bound: "body read interval (" + nameBodyIdleTimeout + ") 250ms < attempt limit 3s", Wait: readInterval, Expect: bodyStalled,
			Bounds: []pool.Option{pool.BodyIdleTimeout(readInterval)},
			setup:  handle(faultserver.StallMidBody{Length: midBodyLength, Send: midBodySend}), drive: get,
			policy: base, subject: "the body read timeout"},
		{Name: "retry/post-unsafe", Contract: "W1", Proto: HTTP1, Fault: "commits the write, answers 503, then 200 with the writes",
			Bound: "one retry allowed for POST, no delay", Expect: postExp(2, 2, 2, 200), setup: writes,
			drive: retried(call{method: http.MethodPost, body: faultserver.Write{}.ReportBody(2)}), policy: unsafe, subject: "the POST"},
		{Name: "retry/post-idempotency-key", Contract: "W2", Proto: HTTP1, Fault: "commits once per key, answers 503, then 200 with the writes",
			Bound: "POST with Idempotency-Key: order-7 retried once, no delay", Expect: postExp(2, 2, 1, 200), setup: writes,
			drive: retried(call{method: http.MethodPost, key: "order-7", body: faultserver.Write{}.ReportBody(1)}), policy: keyed, subject: "the POST"},
		{Name: "retry/post-key-per-attempt", Contract: "W3", Proto: HTTP1, Fault: "commits once per key, answers 503, then 200",
			Bound: "POST retried once, a new key per attempt", Expect: postExp(2, 2, 2, 200), setup: writes,
			drive: retried(call{method: http.MethodPost, key: "order-7", keyPerTry: true}), policy: keyed, subject: "the POST"},
		{Name: "retry/post-not-retried", Contract: "W4", Proto: HTTP1, Fault: "commits the write, answers 503", Bound: "default: POST never retried",
			Expect: postExp(1, 1, 1, 503), setup: writes, drive: retried(call{method: http.MethodPost}), policy: base, subject: "the POST"},
		{Name: "retry/hidden-retry", Contract: "H1", Proto: HTTP1, Fault: "closes a kept-alive connection after reading its 2nd request",
			Bound: "GET on a reused connection", Expect: hidden, setup: handle(faultserver.CloseBeforeResponse{After: 1}),
			drive: warmThen(get), policy: base, subject: "the GET"},
		{Name: "retry/fresh-connection-closed", Contract: "H2", Proto: HTTP1, Fault: "reads the request on a fresh connection, closes it",
			Bound: "GET on a fresh connection: no hidden retry, an error is not retried", Expect: closed,
			setup: handle(faultserver.CloseBeforeResponse{}), drive: get, policy: base, subject: "the GET"},
		{Name: "retry/cancel-in-attempt", Contract: "P1", Proto: HTTP1, Fault: "handler entered, never writes",
			Bound: "the caller cancels once the handler is entered", Expect: canceled, setup: handle(faultserver.Hang{}),
			drive: cancelRetried(get), policy: base, subject: "the canceled GET"},
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = digits[i%10]
		i /= 10
	}
	return string(b[p:])
}
