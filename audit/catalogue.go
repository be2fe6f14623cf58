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

// This file is the catalogue: every scenario, as data. A scenario whose
// fault and steps exist already is added here and nowhere else: the
// in-process runner interprets its steps (drivers.go), connaudit serve
// serves it to the kits, and both judge it by its Expect.

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
	// acquireBound is how long a second caller waits for the pool's one
	// connection: the source's pendingAcquireTimeout.
	acquireBound = time.Second
	// keepAliveRequests is how many requests a connection serves before a
	// server with a keep-alive request limit closes it (nginx's
	// keepalive_requests, small).
	keepAliveRequests = 3
	// serverIdle is the idle timeout of the catalogue's server: short, to
	// keep the catalogue fast; what a client's own idle timeout is judged
	// against is the servers' the runner is told (ServerIdleTimeout).
	serverIdle = 250 * time.Millisecond
	// pingAfter and pingTimeout are HTTP/2's health check on the
	// reference pool: a PING after that long without a frame read, the
	// connection closed when its answer takes longer. Both well past the
	// header bound, which ends the request on a dark connection first.
	pingAfter   = 300 * time.Millisecond
	pingTimeout = 300 * time.Millisecond
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

// fixHealthCheck is what a client whose HTTP/2 connection went dark, and
// kept taking requests, must do, in the policy's terms (the Go audit names
// the Transport's fields: fix.go).
const fixHealthCheck = "check an HTTP/2 connection's health: a PING after a while without a frame read " +
	"(the policy's SendPingTimeout), the connection closed when no answer comes within PingTimeout; without it " +
	"a connection that went dark keeps taking requests, each of which hangs until its own bound"

// once makes f, a fault that arms the connection its warm-up came on, arm
// that one only: the request the client sends again, on a new connection,
// and what follows it are answered 200 "ok".
func once(f faultserver.Fault) faultserver.Fault {
	return faultserver.Sequence{Faults: []faultserver.Fault{f, faultserver.OK{}}}
}

// read is a policy that bounds the read interval only.
func read(d time.Duration) Policy { return Policy{ReadTimeout: d} }

// post is the catalogue's POST: a write of order 7.
func post(key string) Request {
	return Request{Method: http.MethodPost, Body: `{"order":7}`, IdempotencyKey: key}
}

// Notes said when a client takes one of two correct paths.
const (
	// noteLossToCaller: a connection lost before any response byte, whose
	// request the server never processed, reached the caller.
	noteLossToCaller = "the caller got the connection's loss: the server had read none of the request, so " +
		"sending it again on a new connection would have been safe"
	// noteLossNetHTTP follows noteLossToCaller in the Go audit: what a
	// net/http user can do about it.
	noteLossNetHTTP = "nothing in net/http sends it again: a retry layer may, for a request that is idempotent " +
		"or carries an Idempotency-Key"
	// noteHealthCheckFirst: the HTTP/2 health check, shorter than the
	// header bound, ended the request on a connection gone dark.
	noteHealthCheckFirst = "the HTTP/2 health check ended the request before the header bound did: the PING went " +
		"unanswered, and the connection was closed"
	// noteResentUnwritten: the request was sent again on a new connection
	// when none of it had reached the server.
	noteResentUnwritten = "the request was sent again on a new connection, which is safe: none of it had reached the server"
	// noteResentPOST: a POST none of which the server read was sent
	// again: safe here, and the same client sends it again when the server
	// had read it.
	noteResentPOST = "the POST was sent again on a new connection, which is safe here: the server had read none of it; " +
		"a client that does so cannot tell this from a POST the server read (stale-post-close-after-read), where it " +
		"commits the write twice"
	// noteKeyedReplay: a POST the server read and committed was sent again
	// by the client itself, its Idempotency-Key letting the server commit
	// it once.
	noteKeyedReplay = "the client sent the POST again by itself after the server had read it; its Idempotency-Key " +
		"let the server commit it once"
	// noteHiddenReplay: a replayable request the server had read was sent
	// again by the client itself.
	noteHiddenReplay = "the client sent the request again by itself after the server had read it: a hidden retry, " +
		"harmless only because the request is a GET"
)

func http1Scenarios() []Scenario {
	status := func(code int) Scenario {
		e := ok(code)
		e.Fate = reusedFate()
		return Scenario{Name: "status-" + itoa(code), Proto: HTTP1, Fault: "answers " + itoa(code), Bound: "-",
			Expect: e, Serve: faultserver.Status{Code: code}}
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
	hidden := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(2), HiddenRetry: true,
		Fate: reusedFate(), Note: noteHiddenReplay, OnWarmConn: true,
		Or: &Expect{Class: httptrace.ClassServerClosed, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1}}
	hiddenReset := hidden
	hiddenReset.Or = &Expect{Class: httptrace.ClassReset, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1}
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
	early.FateNetHTTP = true // whether a client drains or closes is its choice
	unclosed := ok(200)
	unclosed.Dials = n(2) // closing the unread body closes the connection; /ok dials anew
	unclosed.Leak, unclosed.BlocksOK = true, true
	unclosed.Fate = closedFate(pool.ClosedByClient, pool.ReasonEarlyBodyClose)
	connClose := ok(200)
	connClose.Fate = closedFate(pool.ClosedByServer, pool.ReasonConnectionClose)
	tlsStallExp := failed(httptrace.ClassTLSHandshakeTimeout, httptrace.StageTLS, 0)
	tlsStallExp.Fate = closedFate(pool.ClosedByClient, pool.ReasonHandshakeFailed)
	tlsStallExp.FateNetHTTP = true   // the connection is the client's: the server below TLS counts it
	tlsStallExp.ConnsAccepted = n(1) // the connect succeeded; the handshake stalled
	connectTimeout := failed(httptrace.ClassConnectTimeout, httptrace.StageConnect, 0)
	connectTimeout.Fate = &Fate{None: true}
	refused := failed(httptrace.ClassConnectRefused, httptrace.StageConnect, 0)
	refused.Fate = &Fate{None: true}
	acquire := failed(httptrace.ClassDeadline, httptrace.StagePoolWait, 0)
	acquire.Fate = &Fate{None: true}
	idleClosed := ok(200)
	idleClosed.Dials = n(2) // the warm-up's connection, closed by the server, and the request's
	idleClosed.Fate = reusedFate()
	// heldServedOnly says why the held-body steps are not taken in process.
	const heldServedOnly = "net/http asks for a request's body once it holds a connection, and then waits for the body " +
		"whatever becomes of the connection or the request's context: a body given only later hangs the call, so the " +
		"steps have no equivalent in process"
	// A connection the server closes while the client holds it for a POST
	// none of which was written: the request may go again on a new
	// connection (net/http does so: it wrote nothing, and the body can be
	// had again) or its loss reach the caller.
	held := func(class httptrace.Class) Expect {
		return Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 1, Dials: n(2),
			Fate: reusedFate(), Note: noteResentUnwritten,
			Or: &Expect{Class: class, ServerRequests: 0, Note: noteLossToCaller}}
	}
	// A kept-alive connection the server closed as the client's next
	// request arrived, reading none of it: a GET goes again on a new
	// connection (net/http does so), or its loss reaches the caller.
	staleGet := func(class httptrace.Class) Expect {
		return Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 1, Dials: n(2),
			Unread: n(1), Fate: reusedFate(), Note: noteResentUnwritten, OnWarmConn: true,
			Or: &Expect{Class: class, Stage: httptrace.StageAwaitHeaders, ServerRequests: 0, Note: noteLossToCaller}}
	}
	// The same for a POST: net/http gives the caller the loss (it cannot
	// tell that the server read none of it); a client that sends it again
	// is safe here.
	stalePost := func(class httptrace.Class) Expect {
		e := failed(class, httptrace.StageAwaitHeaders, 0)
		e.Unread, e.Note, e.OnWarmConn = n(1), noteLossToCaller, true
		e.Fate = closedFate(pool.ClosedByServer, map[httptrace.Class]pool.CloseReason{
			httptrace.ClassServerClosed: pool.ReasonServerEOF, httptrace.ClassReset: pool.ReasonServerReset}[class])
		e.Or = &Expect{Class: httptrace.ClassOK, Status: 200, ServerRequests: 1, Note: noteResentPOST}
		return e
	}
	// A POST the server read and committed before it closed the
	// connection: sent again, it is committed twice; its loss must reach
	// the caller.
	committed := func(class httptrace.Class) Expect {
		e := failed(class, httptrace.StageAwaitHeaders, 1)
		e.Writes, e.OnWarmConn = n(1), true
		e.Fate = closedFate(pool.ClosedByServer, map[httptrace.Class]pool.CloseReason{
			httptrace.ClassServerClosed: pool.ReasonServerEOF, httptrace.ClassReset: pool.ReasonServerReset}[class])
		return e
	}
	// With an Idempotency-Key net/http sends the POST again by itself, and
	// the server commits it once.
	keyedReplay := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Writes: n(1), Dials: n(2),
		HiddenRetry: true, Fate: reusedFate(), Note: noteKeyedReplay, OnWarmConn: true,
		Or: &Expect{Class: httptrace.ClassServerClosed, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1, Writes: n(1)}}
	// A dark connection: the request's bound ends it, the server having
	// read nothing; the connection is the client's to close, and /ok goes
	// on a new one.
	dark := failed(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders, 0)
	dark.Fate, dark.OnWarmConn = closedFate(pool.ClosedByClient, pool.ReasonRequestError), true
	// The keep-alive limit: the request after it goes on a new connection
	// and succeeds, and no request is read twice.
	limited := ok(200)
	limited.Dials, limited.Fate = n(2), reusedFate()
	return []Scenario{
		{Name: "ok", Proto: HTTP1, Fault: `200 "ok"`, Bound: "-", Expect: okExp, Serve: faultserver.OK{}},
		status(503), status(500), status(404),
		{Name: "response-header-timeout", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "ResponseHeaderTimeout 150ms",
			Wait: boundShort, Expect: rht, Policy: read(boundShort), Serve: faultserver.Hang{}},
		{Name: "attempt-deadline", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "deadline 150ms once the request is written",
			Wait: boundShort, Expect: deadline, Policy: Policy{Policy: retry.Policy{AttemptTimeout: boundShort}}, Serve: faultserver.Hang{}},
		{Name: "cancel-in-handler", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "cancel once the handler is entered",
			Expect: canceled, Serve: faultserver.Hang{}, Steps: StepsCancelWhenEntered},
		{Name: "cancel-waiting-for-conn", Proto: HTTP1, Fault: "the one connection is busy", Bound: "cancel the 2nd request while it waits",
			Expect: waiting, Serve: faultserver.OK{}, Steps: StepsCancelWhileWaiting,
			InProcessOnly: "a kit cannot tell when its call waits for the pool; pool-acquire-timeout judges the pool of one"},
		{Name: "pool-acquire-timeout", Proto: HTTP1, Fault: "the one connection is held by a request the server never answers",
			Bound: "the second caller waits at most 1s for the pool", Wait: acquireBound, Expect: acquire, Serve: faultserver.OK{},
			Steps: StepsSecondCaller, Policy: Policy{PoolMaxPerHost: 1, PoolAcquireTimeout: acquireBound}},
		{Name: "close-before-response", Proto: HTTP1, Fault: "reads the request, closes", Bound: "-",
			Expect: closeBefore, Serve: faultserver.CloseBeforeResponse{}},
		{Name: "hidden-retry", Proto: HTTP1, Fault: "closes a kept-alive connection after reading its 2nd request", Bound: "GET on a reused connection",
			Expect: hidden, Serve: faultserver.CloseBeforeResponse{After: 1}, Steps: StepsWarmThenRequest},
		{Name: "hidden-retry-reset", Proto: HTTP1, Fault: "resets (RST) a kept-alive connection after reading its 2nd request", Bound: "GET on a reused connection",
			Expect: hiddenReset, Serve: faultserver.Reset{After: 1}, Steps: StepsWarmThenRequest},
		{Name: "reset", Proto: HTTP1, Fault: "RST (linger 0) after reading the request", Bound: "-",
			Expect: reset, Serve: faultserver.Reset{}},
		{Name: "close-mid-body", Proto: HTTP1, Fault: "Content-Length 10000, sends 1000, closes", Bound: "-",
			Expect: truncated, Serve: faultserver.CloseMidBody{Length: midBodyLength, Send: midBodySend}},
		{Name: "stall-mid-body", Proto: HTTP1, Fault: "sends half the body, stalls", Bound: "body idle 150ms",
			Wait: boundShort, Expect: stall, Policy: read(boundShort), Serve: faultserver.StallMidBody{Length: 10000, Send: 5000}},
		{Name: "trickle-body", Proto: HTTP1, Fault: "a byte every 50ms for 1.2s", Bound: "body idle 1s",
			Wait: trickleEvery * (trickleBytes - 1), Expect: trickle, Policy: read(trickleIdle),
			Serve: faultserver.Trickle{Bytes: trickleBytes, Interval: trickleEvery}},
		{Name: "early-body-close", Proto: HTTP1, Fault: "1 MiB body", Bound: "client closes after 10 bytes",
			Expect: early, Serve: faultserver.LargeBody{Size: 1 << 20}, Steps: StepsReadThenClose, ReadBytes: earlyRead},
		{Name: "unclosed-body", Proto: HTTP1, Fault: `200 "ok"`, Bound: "body never closed (until the check)",
			Expect: unclosed, Serve: faultserver.OK{}, Steps: StepsLeaveBodyOpen,
			InProcessOnly: "a leak inside the client's process: only an in-process pool check sees the open body"},
		{Name: "connection-close", Proto: HTTP1, Fault: "Connection: close", Bound: "-",
			Expect: connClose, Serve: faultserver.ConnectionClose{}},
		{Name: "idle-close", Proto: HTTP1, Fault: "closes (FIN) the kept-alive connection while it is idle, before the next request",
			Bound: "-", Expect: idleClosed, Serve: faultserver.OK{}, Steps: StepsWarmCloseThenRequest, Close: "fin"},
		{Name: "reset-before-send", Proto: HTTP1, Fault: "resets (RST) the kept-alive connection the client holds for a POST not yet written",
			Bound: "-", Expect: held(httptrace.ClassReset), Serve: faultserver.OK{}, Steps: StepsWarmThenHeldBody, Close: "rst",
			Request: post(""), ServedOnly: heldServedOnly},
		{Name: "close-before-send", Proto: HTTP1, Fault: "closes (FIN) the kept-alive connection the client holds for a POST not yet written",
			Bound: "-", Expect: held(httptrace.ClassServerClosed), Serve: faultserver.OK{}, Steps: StepsWarmThenHeldBody, Close: "fin",
			Request: post(""), ServedOnly: heldServedOnly},
		{Name: "stale-close-before-read", Proto: HTTP1, Fault: "closes (FIN) a kept-alive connection as its 2nd request arrives, reading none of it",
			Bound: "GET on a reused connection", Expect: staleGet(httptrace.ClassServerClosed), Steps: StepsWarmThenRequest,
			Serve: once(faultserver.CloseBeforeRead{After: 1})},
		{Name: "stale-reset-before-read", Proto: HTTP1, Fault: "resets (RST) a kept-alive connection as its 2nd request arrives, reading none of it",
			Bound: "GET on a reused connection", Expect: staleGet(httptrace.ClassReset), Steps: StepsWarmThenRequest,
			Serve: once(faultserver.CloseBeforeRead{After: 1, Reset: true})},
		{Name: "stale-post-close-before-read", Proto: HTTP1, Fault: "closes (FIN) a kept-alive connection as its 2nd request, a POST, arrives, reading none of it",
			Bound: "POST on a reused connection", Expect: stalePost(httptrace.ClassServerClosed), Steps: StepsWarmThenRequest,
			Serve: once(faultserver.CloseBeforeRead{After: 1}), Request: post("")},
		{Name: "stale-post-reset-before-read", Proto: HTTP1, Fault: "resets (RST) a kept-alive connection as its 2nd request, a POST, arrives, reading none of it",
			Bound: "POST on a reused connection", Expect: stalePost(httptrace.ClassReset), Steps: StepsWarmThenRequest,
			Serve: once(faultserver.CloseBeforeRead{After: 1, Reset: true}), Request: post("")},
		{Name: "stale-post-key-before-read", Proto: HTTP1, Fault: "closes (FIN) a kept-alive connection as its 2nd request, a POST with an Idempotency-Key, arrives, reading none of it",
			Bound: "POST with Idempotency-Key on a reused connection", Expect: staleGet(httptrace.ClassServerClosed),
			Steps: StepsWarmThenRequest, Serve: once(faultserver.CloseBeforeRead{After: 1}), Request: post("order-7")},
		{Name: "stale-post-close-after-read", Proto: HTTP1, Fault: "reads a kept-alive connection's 2nd request, a POST, commits it, closes (FIN)",
			Bound: "POST on a reused connection", Expect: committed(httptrace.ClassServerClosed), Steps: StepsWarmThenRequest,
			Serve: faultserver.CloseBeforeResponse{After: 1, Write: true}, Request: post("")},
		{Name: "stale-post-reset-after-read", Proto: HTTP1, Fault: "reads a kept-alive connection's 2nd request, a POST, commits it, resets (RST)",
			Bound: "POST on a reused connection", Expect: committed(httptrace.ClassReset), Steps: StepsWarmThenRequest,
			Serve: faultserver.Reset{After: 1, Write: true}, Request: post("")},
		{Name: "stale-post-key-after-read", Proto: HTTP1, Fault: "reads a kept-alive connection's 2nd request, a POST with an Idempotency-Key, commits it, closes (FIN)",
			Bound: "POST with Idempotency-Key on a reused connection", Expect: keyedReplay, Steps: StepsWarmThenRequest,
			Serve: faultserver.CloseBeforeResponse{After: 1, Write: true}, Request: post("order-7")},
		{Name: "go-dark", Proto: HTTP1, Fault: "a kept-alive connection goes dark after its 1st response: nothing read, answered or closed",
			Bound: "ResponseHeaderTimeout 150ms", Wait: boundShort, Expect: dark, Steps: StepsWarmThenRequest, Policy: read(boundShort),
			Serve: faultserver.GoDark{After: 1}},
		{Name: "request-limit", Proto: HTTP1, Fault: "each connection serves 3 requests, the 3rd with Connection: close",
			Bound: "-", Expect: limited, Steps: StepsWarmThenRequest, Warm: keepAliveRequests,
			Serve: faultserver.RequestLimit{N: keepAliveRequests, Announce: true}},
		{Name: "request-limit-silent", Proto: HTTP1, Fault: "each connection serves 3 requests, then the server closes it with no warning",
			Bound: "-", Expect: limited, Steps: StepsWarmCloseThenRequest, Warm: keepAliveRequests, Close: "limit",
			Serve: faultserver.RequestLimit{N: keepAliveRequests}},
		{Name: "server-idle-timeout", Proto: HTTP1, Fault: "closes (FIN) a connection idle for 250ms, its keep-alive timeout",
			Bound: "IdleConnTimeout below the servers' keep-alive timeout", Wait: serverIdle, Expect: idleClosed,
			Steps: StepsWarmCloseThenRequest, Close: "idle", Serve: once(faultserver.IdleClose{Idle: serverIdle})},
		{Name: "tls-handshake-stall", Proto: HTTP1, Fault: "TCP accept, then silence", Bound: "TLSHandshakeTimeout 150ms",
			Wait: boundShort, Expect: tlsStallExp, Policy: Policy{TLSTimeout: boundShort}, Listener: ListenTLSStall},
		{Name: "connect-hang", Proto: HTTP1, Fault: "accept queue full", Bound: "Dialer.Timeout 150ms",
			Wait: boundShort, Expect: connectTimeout, Policy: Policy{ConnectTimeout: boundShort}, Listener: ListenConnectHang},
		{Name: "connect-refused", Proto: HTTP1, Fault: "closed port", Bound: "-",
			Expect: refused, Listener: ListenClosedPort},
	}
}

func http2Scenarios() []Scenario {
	reused := func(e Expect) Expect {
		e.Fate = reusedFate()
		return e
	}
	status := func(code int) Scenario {
		return Scenario{Name: "h2/status-" + itoa(code), Proto: HTTP2, Fault: "answers " + itoa(code), Bound: "-",
			Expect: reused(ok(code)), Serve: faultserver.Status{Code: code}}
	}
	okExp := reused(ok(200))
	rht := reused(failed(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders, 1))
	rht.CancelObserved = true
	deadline := reused(failed(httptrace.ClassDeadline, httptrace.StageAwaitHeaders, 1))
	deadline.CancelObserved = true
	canceled := reused(failed(httptrace.ClassCanceled, httptrace.StageAwaitHeaders, 1))
	canceled.CancelObserved = true
	canceled.HandlersEntered = n(1)
	// Over HTTP/2 a cancelled stream leaves the connection to the
	// client's choice (and a kit that can cancel only by stopping the
	// client's process, curl's, closes it).
	canceled.FateNetHTTP = true
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
	early.FateNetHTTP = true
	unclosed := reused(ok(200))
	unclosed.Leak = true
	closeBefore := failed(httptrace.ClassServerClosed, httptrace.StageAwaitHeaders, 1)
	closeBefore.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerEOF)
	connClose := ok(200)
	connClose.Fate = closedFate(pool.ClosedByServer, pool.ReasonServerGoAway)
	goaway := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(2), HiddenRetry: true,
		Fate: reusedFate(), Note: noteResentUnwritten,
		Or: &Expect{Class: httptrace.ClassGoAway, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1, Note: noteLossToCaller}}
	refused := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 2, Dials: n(1), HiddenRetry: true,
		Fate: reusedFate(), Note: noteResentUnwritten,
		Or: &Expect{Class: httptrace.ClassStreamReset, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1, Note: noteLossToCaller}}
	// A reused connection closed as the next stream arrives: the GET goes
	// again on a new connection, or its loss reaches the caller.
	staleGet := Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 1, ServerRequests: 1, Dials: n(2),
		Unread: n(1), Fate: reusedFate(), Note: noteResentUnwritten, OnWarmConn: true,
		Or: &Expect{Class: httptrace.ClassServerClosed, Stage: httptrace.StageAwaitHeaders, ServerRequests: 0, Note: noteLossToCaller}}
	// A dark connection: the request's bound ends it; the health check
	// (a PING unanswered) closes the connection, so /ok goes on a new one.
	// A client whose health check is shorter than its header bound has
	// the request ended by the check itself, which closes the connection.
	dark := failed(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders, 0)
	dark.Fate, dark.OnWarmConn = closedFate(pool.ClosedByClient, pool.ReasonPingTimeout), true
	dark.Or = &Expect{Class: httptrace.ClassTimeout, Stage: httptrace.StageAwaitHeaders, ServerRequests: 0, Note: noteHealthCheckFirst}
	limited := ok(200)
	limited.Dials, limited.Fate = n(2), reusedFate()
	idleClosed := ok(200)
	idleClosed.Dials, idleClosed.Fate = n(2), reusedFate()
	return []Scenario{
		{Name: "h2/ok", Proto: HTTP2, Fault: `200 "ok"`, Bound: "-", Expect: okExp, Serve: faultserver.OK{}},
		status(503), status(500), status(404),
		{Name: "h2/response-header-timeout", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "ResponseHeaderTimeout 150ms",
			Wait: boundShort, Expect: rht, Policy: read(boundShort), Serve: faultserver.Hang{}},
		{Name: "h2/attempt-deadline", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "deadline 150ms once the request is written",
			Wait: boundShort, Expect: deadline, Policy: Policy{Policy: retry.Policy{AttemptTimeout: boundShort}}, Serve: faultserver.Hang{}},
		{Name: "h2/cancel-in-handler", Proto: HTTP2, Fault: "handler entered, never writes", Bound: "cancel once the handler is entered",
			Expect: canceled, Serve: faultserver.Hang{}, Steps: StepsCancelWhenEntered},
		{Name: "h2/close-before-response", Proto: HTTP2, Fault: "reads the request, closes the connection", Bound: "-",
			Expect: closeBefore, Serve: faultserver.CloseBeforeResponse{}},
		{Name: "h2/connection-close", Proto: HTTP2, Fault: "Connection: close (GOAWAY, close when idle)", Bound: "-",
			Expect: connClose, Serve: faultserver.ConnectionClose{}},
		{Name: "h2/reset", Proto: HTTP2, Fault: "RST_STREAM(INTERNAL_ERROR)", Bound: "-", Expect: streamReset, Serve: faultserver.Reset{}},
		{Name: "h2/close-mid-body", Proto: HTTP2, Fault: "sends 1000 of 10000 bytes, resets the stream", Bound: "-", Expect: midBody,
			Serve: faultserver.CloseMidBody{Length: midBodyLength, Send: midBodySend}},
		{Name: "h2/stall-mid-body", Proto: HTTP2, Fault: "sends half the body, stalls", Bound: "body idle 150ms",
			Wait: boundShort, Expect: stall, Policy: read(boundShort), Serve: faultserver.StallMidBody{Length: 10000, Send: 5000}},
		{Name: "h2/trickle-body", Proto: HTTP2, Fault: "a byte every 50ms for 1.2s", Bound: "body idle 1s",
			Wait: trickleEvery * (trickleBytes - 1), Expect: trickle, Policy: read(trickleIdle),
			Serve: faultserver.Trickle{Bytes: trickleBytes, Interval: trickleEvery}},
		{Name: "h2/early-body-close", Proto: HTTP2, Fault: "1 MiB body", Bound: "client closes after 10 bytes",
			Expect: early, Serve: faultserver.LargeBody{Size: 1 << 20}, Steps: StepsReadThenClose, ReadBytes: earlyRead},
		{Name: "h2/unclosed-body", Proto: HTTP2, Fault: `200 "ok"`, Bound: "body never closed (until the check)",
			Expect: unclosed, Serve: faultserver.OK{}, Steps: StepsLeaveBodyOpen,
			InProcessOnly: "a leak inside the client's process: only an in-process pool check sees the open body"},
		{Name: "h2/stale-close-before-read", Proto: HTTP2, Fault: "closes the connection as a 2nd stream's HEADERS arrive, reading none of it",
			Bound: "GET on a reused connection", Expect: staleGet, Steps: StepsWarmThenRequest, Listener: ListenRawHTTP2,
			Serve: once(faultserver.CloseBeforeRead{After: 1})},
		{Name: "h2/go-dark", Proto: HTTP2, Fault: "the connection goes dark after its 1st response: nothing read, answered or closed",
			Bound: "ResponseHeaderTimeout 150ms; HTTP/2 PING after 300ms, answered within 300ms", Wait: boundShort + pingAfter + pingTimeout,
			Expect: dark, Steps: StepsWarmThenRequest, Serve: faultserver.GoDark{After: 1}, Fix: fixHealthCheck, Settle: true,
			Policy: Policy{ReadTimeout: boundShort, SendPingTimeout: pingAfter, PingTimeout: pingTimeout}},
		{Name: "h2/request-limit", Proto: HTTP2, Fault: "each connection serves 3 requests, then GOAWAY",
			Bound: "-", Expect: limited, Steps: StepsWarmThenRequest, Warm: keepAliveRequests,
			Serve: faultserver.RequestLimit{N: keepAliveRequests, Announce: true}},
		{Name: "h2/request-limit-silent", Proto: HTTP2, Fault: "each connection serves 3 requests, then the server closes it with no GOAWAY",
			Bound: "-", Expect: limited, Steps: StepsWarmCloseThenRequest, Warm: keepAliveRequests, Close: "limit",
			Listener: ListenRawHTTP2, Serve: faultserver.RequestLimit{N: keepAliveRequests}},
		{Name: "h2/server-idle-timeout", Proto: HTTP2, Fault: "closes a connection idle for 250ms, its keep-alive timeout",
			Bound: "IdleConnTimeout below the servers' keep-alive timeout", Wait: serverIdle, Expect: idleClosed,
			Steps: StepsWarmCloseThenRequest, Close: "idle", Serve: once(faultserver.IdleClose{Idle: serverIdle})},
		{Name: "h2/goaway", Proto: HTTP2, Fault: "GOAWAY below the request's stream", Bound: "-", Expect: goaway, Listener: ListenRawHTTP2,
			Serve: faultserver.Sequence{Faults: []faultserver.Fault{faultserver.GoAway{}, faultserver.OK{}}}},
		{Name: "h2/refused-stream", Proto: HTTP2, Fault: "RST_STREAM(REFUSED_STREAM), then 200", Bound: "-", Expect: refused,
			Listener: ListenRawHTTP2,
			Serve:    faultserver.Sequence{Faults: []faultserver.Fault{faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{}}}},
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
	// A9, after the source's 400, 500, 200 ms: each attempt answers after
	// slowAnswer, 200 ms within the attempt limit, but two of them and the
	// delay exceed it by 200 ms, margins a loaded machine's scheduling
	// does not cross (at 150 of 300 ms, 100 past, it did).
	slowAnswer  = 300 * time.Millisecond
	slowAttempt = 500 * time.Millisecond
	slowDelay   = 100 * time.Millisecond
)

func retryScenarios() []Scenario {
	base := retry.Policy{AttemptTimeout: 3 * time.Second, TotalTimeout: 8 * time.Second, MaxRetries: 2, Delay: 10 * time.Millisecond}
	with := func(edit func(*retry.Policy)) Policy {
		p := base
		edit(&p)
		return Policy{Policy: p}
	}
	basic := Policy{Policy: base}
	seq := func(f ...faultserver.Fault) faultserver.Fault { return faultserver.Sequence{Faults: f} }
	s503 := faultserver.Status{Code: 503}
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
	budget.BudgetEnds = true
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
	hidden.HiddenRetry, hidden.Dials, hidden.Note, hidden.OnWarmConn = true, n(2), noteHiddenReplay, true
	hidden.Or = &Expect{Class: httptrace.ClassServerClosed, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1}
	hiddenReset := hidden
	hiddenReset.Or = &Expect{Class: httptrace.ClassReset, Stage: httptrace.StageAwaitHeaders, ServerRequests: 1}
	// The second answer reports the writes the server committed, which
	// the caller must read in the body it gets.
	writes := seq(faultserver.Write{Status: 503}, faultserver.Write{Status: 200, Report: true})
	reported := func(r Request, n int64) Request {
		r.Reported = faultserver.Write{}.ReportBody(n)
		return r
	}
	const bound = "503 only, 2 retries 10ms apart"
	at := func(attempt, total, delay time.Duration) Policy {
		return with(func(p *retry.Policy) { p.AttemptTimeout, p.TotalTimeout, p.Delay = attempt, total, delay })
	}
	// A9 at the source's numbers answers after 400 ms (100 ms of slack
	// within its 500 ms attempt: a loaded machine may overrun it).
	const sourceAnswer = 400 * time.Millisecond
	return []Scenario{
		{Name: "retry/immediate-success", Contract: "A1", Proto: HTTP1, Fault: `200 "ok"`, Bound: bound,
			Expect: exp(httptrace.ClassOK, 200, 1, 1), Serve: faultserver.OK{}, Policy: basic, Subject: "200",
			Fix: "make one attempt for a response that is not retried, and hand its body over"},
		{Name: "retry/503-503-ok", Contract: "A2", Proto: HTTP1, Fault: "503, 503, 200", Bound: bound,
			Wait: 2 * base.Delay, Expect: exp(httptrace.ClassOK, 200, 3, 3), Serve: seq(s503, s503, faultserver.OK{}),
			Policy: basic, Subject: "503", Fix: "retry a 503, up to MaxRetries times, waiting Delay between attempts"},
		{Name: "retry/always-503", Contract: "A3", Proto: HTTP1, Fault: "503 every time", Bound: bound,
			Wait: 2 * base.Delay, Expect: exp(httptrace.ClassOK, 503, 3, 3), Serve: s503, Policy: basic, Subject: "503",
			Fix: "stop after MaxRetries retries and hand the caller the last 503 itself, not an error"},
		{Name: "retry/404", Contract: "A4", Proto: HTTP1, Fault: "answers 404", Bound: bound,
			Expect: exp(httptrace.ClassOK, 404, 1, 1), Serve: faultserver.Status{Code: 404}, Policy: basic, Subject: "404",
			Fix: "retry 503 only: a 404 is final and reaches the caller as it is"},
		{Name: "retry/500", Contract: "A5", Proto: HTTP1, Fault: "answers 500", Bound: bound,
			Expect: exp(httptrace.ClassOK, 500, 1, 1), Serve: faultserver.Status{Code: 500}, Policy: basic, Subject: "500",
			Fix: "retry 503 only: a 500 is final (the request may have run) and reaches the caller"},
		{Name: "retry/attempt-deadline", Contract: "A6", Proto: HTTP1, Fault: "handler entered, never writes", Bound: "attempt limit 150ms",
			Wait: boundShort, Expect: timedOut(httptrace.ClassDeadline, httptrace.StageAwaitHeaders), Serve: faultserver.Hang{},
			Steps: StepsWarmThenRequest, WarmAside: true, Policy: with(func(p *retry.Policy) { p.AttemptTimeout = boundShort }),
			Subject: "the attempt timeout", Fix: "bound each attempt by AttemptTimeout, and end the call when it fires",
			Source: &Source{Policy: with(func(p *retry.Policy) { p.AttemptTimeout = time.Second })}},
		{Name: "retry/response-header-timeout", Contract: "A7", Proto: HTTP1, Fault: "handler entered, never writes",
			Bound: "header wait (ResponseHeaderTimeout) 250ms < attempt limit 3s", Wait: readInterval,
			Expect: timedOut(httptrace.ClassResponseHeaderTimeout, httptrace.StageAwaitHeaders),
			Policy: Policy{Policy: base, ReadTimeout: readInterval}, Serve: faultserver.Hang{}, Subject: "the header wait timeout",
			Fix: "the header wait's timeout (the transport's ResponseHeaderTimeout) is final: do not retry it, and hand the caller its error, not an attempt timeout"},
		{Name: "retry/total-budget", Contract: "A8", Proto: HTTP1, Fault: "503 at once, every time",
			Bound: "attempt 300ms, budget 450ms, delay 300ms", Wait: budgetTotal, Expect: budget, Serve: s503,
			Steps: StepsWarmThenRequest, WarmAside: true, Policy: at(budgetAttempt, budgetTotal, budgetDelay), Subject: "503",
			Fix:    "count the delays in the total budget: end the call with a deadline error when it runs out during a delay",
			Source: &Source{Policy: at(time.Second, 1500*time.Millisecond, time.Second), Wait: 1500 * time.Millisecond}},
		{Name: "retry/attempt-limit-restarts", Contract: "A9", Proto: HTTP1, Fault: "503, then 200, each after 300ms",
			Bound: "attempt 500ms, budget 2s, delay 100ms", Wait: 2*slowAnswer + slowDelay, Expect: exp(httptrace.ClassOK, 200, 2, 2),
			Serve: seq(faultserver.Status{Code: 503, After: slowAnswer}, faultserver.Status{Code: 200, After: slowAnswer}),
			Steps: StepsWarmThenRequest, WarmAside: true, Policy: at(slowAttempt, 4*slowAttempt, slowDelay), Subject: "503",
			Fix: "restart the attempt limit on each retry: it bounds one attempt, not all of them",
			Source: &Source{Policy: at(500*time.Millisecond, 2*time.Second, 200*time.Millisecond), Wait: 2 * sourceAnswer,
				Serve: seq(faultserver.Status{Code: 503, After: sourceAnswer}, faultserver.Status{Code: 200, After: sourceAnswer})}},
		{Name: "retry/body-read-interval", Contract: "A10", Proto: HTTP1, Fault: "sends half the body, stalls",
			Bound: "body read interval (" + nameBodyIdleTimeout + ") 250ms < attempt limit 3s", Wait: readInterval, Expect: bodyStalled,
			Policy: Policy{Policy: base, ReadTimeout: readInterval},
			Serve:  faultserver.StallMidBody{Length: midBodyLength, Send: midBodySend}, Subject: "the body read timeout",
			Fix: "the body read interval's timeout (" + nameBodyIdleTimeout + ") is final: do not retry it, and hand the caller its error, not an attempt timeout"},
		{Name: "retry/post-unsafe", Contract: "W1", Proto: HTTP1, Fault: "commits the write, answers 503, then 200 with the writes",
			Bound: "one retry allowed for POST, no delay", Expect: postExp(2, 2, 2, 200), Serve: writes,
			Request: reported(post(""), 2), Policy: unsafe, Subject: "the POST",
			Fix: "replay a POST once when the policy allows it, with its body (GetBody)"},
		{Name: "retry/post-idempotency-key", Contract: "W2", Proto: HTTP1, Fault: "commits once per key, answers 503, then 200 with the writes",
			Bound: "POST with Idempotency-Key: order-7 retried once, no delay", Expect: postExp(2, 2, 1, 200), Serve: writes,
			Request: reported(post("order-7"), 1), Policy: keyed, Subject: "the POST",
			Fix: "keep the Idempotency-Key across attempts, so that the server commits once"},
		{Name: "retry/post-key-per-attempt", Contract: "W3", Proto: HTTP1, Fault: "commits once per key, answers 503, then 200",
			Bound: "POST retried once, a new key per attempt", Expect: postExp(2, 2, 2, 200), Serve: writes,
			Request: Request{Method: http.MethodPost, Body: `{"order":7}`, IdempotencyKey: "order-7", KeyPerAttempt: true},
			Policy:  keyed, Subject: "the POST",
			Fix: "a new Idempotency-Key per attempt defeats it: generate the key once per call"},
		{Name: "retry/post-not-retried", Contract: "W4", Proto: HTTP1, Fault: "commits the write, answers 503", Bound: "default: POST never retried",
			Expect: postExp(1, 1, 1, 503), Serve: writes, Request: post(""), Policy: basic, Subject: "the POST",
			Fix: "never replay a POST unless asked: the server may have committed its write"},
		{Name: "retry/hidden-retry", Contract: "H1", Proto: HTTP1, Fault: "closes a kept-alive connection after reading its 2nd request",
			Bound: "GET on a reused connection", Expect: hidden, Serve: faultserver.CloseBeforeResponse{After: 1},
			Steps: StepsWarmThenRequest, Policy: basic, Subject: "the GET",
			Fix: "net/http's own re-send cannot be turned off: make the endpoint idempotent"},
		{Name: "retry/hidden-retry-reset", Contract: "H1", Proto: HTTP1, Fault: "resets (RST) a kept-alive connection after reading its 2nd request",
			Bound: "GET on a reused connection", Expect: hiddenReset, Serve: faultserver.Reset{After: 1},
			Steps: StepsWarmThenRequest, Policy: basic, Subject: "the GET",
			Fix: "net/http's own re-send cannot be turned off: make the endpoint idempotent"},
		{Name: "retry/fresh-connection-closed", Contract: "H2", Proto: HTTP1, Fault: "reads the request on a fresh connection, closes it",
			Bound: "GET on a fresh connection: no hidden retry, an error is not retried", Expect: closed,
			Serve: faultserver.CloseBeforeResponse{}, Policy: basic, Subject: "the GET",
			Fix: "an error is final: a connection lost before the response reaches the caller after one request"},
		{Name: "retry/cancel-in-attempt", Contract: "P1", Proto: HTTP1, Fault: "handler entered, never writes",
			Bound: "the caller cancels once the handler is entered", Expect: canceled, Serve: faultserver.Hang{},
			Steps: StepsCancelWhenEntered, Policy: basic, Subject: "the canceled GET",
			Fix: "stop at the caller's cancel: no attempt, and no delay, after the call's context has ended"},
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
