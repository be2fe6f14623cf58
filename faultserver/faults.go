package faultserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// A Fault is what an endpoint does with each request it reads. Faults are the
// typed values of this package; the interface is sealed.
//
// Unless its doc says otherwise, a fault behaves the same over HTTP/1 and
// over the standard HTTP/2 server ([TLS] with a client that negotiates
// h2). "Supported by [RawHTTP2]" marks the faults the raw HTTP/2 server
// can produce; [Server.Handle] panics for the others in that mode.
type Fault interface {
	// validate reports whether the fault is well formed and can be produced
	// by a server in mode m.
	validate(m mode) error
}

// mode is what a server speaks, for the faults to say whether they can be
// produced there.
type mode struct {
	raw    bool // RawHTTP2: this package's HTTP/2 server
	tls    bool // TLS (RawHTTP2 implies it)
	h2only bool // HTTP2Only (RawHTTP2 implies it): no HTTP/1 at all
}

// OK answers 200 with Body as text/plain ("ok" if Body is empty).
// Supported by [RawHTTP2].
type OK struct {
	Body string
}

// Status answers with status Code, the headers in Header (e.g. Retry-After)
// and an empty body. Code must be in 200..599. With After > 0 the handler
// first waits that long, as a slow endpoint does; a client that goes away
// meanwhile gets no answer and is counted as a cancellation. Supported by
// [RawHTTP2] with After 0.
type Status struct {
	Code   int
	Header http.Header
	After  time.Duration
}

// Hang enters the handler and never writes. It returns when the client goes
// away (counted in [Counters].CancelsObserved and signalled on
// [Server.CancelObserved]), or, without a response (HTTP/1: the connection is
// closed; HTTP/2: RST_STREAM), when the server cuts the connection or closes.
// Request bodies are read first (up to 1 MiB), since net/http notices a
// client leaving only once the body is read. Supported by [RawHTTP2],
// where the client going away is an RST_STREAM or the connection ending.
type Hang struct{}

// CloseBeforeResponse reads the request and closes the connection without
// writing anything. Over HTTP/1 the connection is hijacked and closed; over
// HTTP/2 the server half-closes the whole TCP connection (FIN, then reads
// until the client closes), which the client sees as "unexpected EOF".
//
// With After > 0 the first After requests for its path on each connection
// are answered 200 "ok", and the connection is closed right after reading
// the next one. On a kept-alive HTTP/1 connection, After: 1 triggers the
// net/http Transport's hidden retry: the caller sees one successful
// request, the server reads two. Supported by [RawHTTP2].
//
// With Write set, every request for the path whose method is not GET or
// HEAD commits a write, as [Write] does (counted in
// [Counters].WritesCommitted, deduplicated by Idempotency-Key, its key
// recorded for [Server.IdempotencyKeys]), after its body is read and before
// it is answered or cut. So a POST read on a kept-alive connection and then
// cut has been committed: a client that sends it again commits it twice,
// unless it carries an Idempotency-Key the endpoint has already seen.
type CloseBeforeResponse struct {
	// After is how many requests for the path on each connection are
	// answered before the close; 0 closes on the first. After >= 0.
	After int
	// Write makes each request other than GET and HEAD commit a write
	// before it is answered or cut.
	Write bool
}

// Reset reads the request and aborts it abruptly. Over HTTP/1 the connection
// is hijacked, its linger set to 0 and closed, so the client gets a TCP RST
// (errors.Is(err, syscall.ECONNRESET)). Over HTTP/2 the stream is reset with
// RST_STREAM(INTERNAL_ERROR). Supported by [RawHTTP2].
//
// With After > 0 the first After requests for its path on each connection
// are answered 200 "ok", and the connection is reset right after reading
// the next one: [CloseBeforeResponse]'s After with an RST for the FIN.
//
// With Write set, a request other than GET and HEAD commits a write before
// it is answered or reset, as with [CloseBeforeResponse]'s Write.
type Reset struct {
	// After is how many requests for the path on each connection are
	// answered before the reset; 0 resets on the first. After >= 0.
	After int
	// Write makes each request other than GET and HEAD commit a write
	// before it is answered or reset.
	Write bool
}

// CloseBeforeRead answers the first After requests for its path on each
// connection 200 "ok"; then, when the first bytes of the connection's next
// request arrive, the server closes the connection without reading that
// request: it is never counted in [Counters].RequestsRead, never handed to a
// handler and commits nothing. It models a server or a load balancer that
// closed an idle kept-alive connection just as the client sent its next
// request on it.
//
// The close is a FIN: the server half-closes the TCP connection and reads
// and discards what the client still sends until the client closes or 2 s
// pass, so that the client reads a clean EOF, not an RST caused by unread
// data. With Reset it is an RST (linger 0) instead. Over TLS the close is
// the TCP connection's, with no close_notify.
//
// The request is counted in [Counters].Unread of the path whose fault armed
// the connection, and reported as a [ConnUnread] event with that path, so
// that a listener of [OnConnEvent] can tell that the client sent something
// on the doomed connection.
//
// Over plain HTTP/1 the connection is armed once the After-th response is
// written, and the first bytes read after that trip it. Supported by
// [RawHTTP2], where the next HEADERS frame of a new stream after the
// After-th response trips it (a WINDOW_UPDATE, a SETTINGS acknowledgement
// or a PING before it does not). The standard server over TLS cannot
// produce it: the connection under it sees encrypted records, in which a
// request cannot be told from a PING or from the client's close_notify;
// [Server.Handle] panics with [TLS] and [HTTP2Only].
type CloseBeforeRead struct {
	// After is how many requests for the path on each connection are
	// answered before the close. After >= 1: the connection is armed by a
	// request it answered.
	After int
	// Reset closes with a TCP RST instead of a FIN.
	Reset bool
}

// GoDark answers the first After requests for its path on each connection
// 200 "ok"; once the After-th response is written the connection goes dark,
// as a flow a NAT or a load balancer forgot: the server delivers nothing
// the client sends afterwards to HTTP (it reads and discards it, so no
// request is read and no PING answered), writes nothing, and never closes
// the connection, until the client closes it, the connection is cut
// ([Server.CloseConn], [Server.ResetConn], [Server.CloseClientConnections]),
// the server closes, or 60 s pass (a bound on the resources a forgotten
// connection holds; the server then closes it with a FIN).
//
// Each connection that went dark is counted in [Counters].DarkConns of the
// path whose fault darkened it, and each read that returned bytes on a dark
// connection is reported as a [ConnUnread] event with that path (requests
// in the dark are not counted: bytes cannot be told apart as requests).
//
// Over HTTP/1 the connection goes dark once the response is written. Over
// the standard HTTP/2 server, once the last open stream's response is
// written (the write that carries its END_STREAM); the frame reader's read
// in flight then discards what it returns. Supported by [RawHTTP2].
type GoDark struct {
	// After is how many requests for the path on each connection are
	// answered before the connection goes dark. After >= 1.
	After int
}

// RequestLimit answers every request for its path 200 "ok", and makes the
// N-th one on each connection the connection's last, as nginx's
// keepalive_requests does.
//
// With Announce the N-th response carries "Connection: close": over HTTP/1
// the server closes the connection after it; over HTTP/2 the server sends
// GOAWAY after it, as net/http's server does for Connection: close, and
// closes the connection once it is idle.
//
// Without Announce the server closes the connection right after the N-th
// response with no warning. Over HTTP/1 the response is whole (with its
// Content-Length) and written; then the server half-closes the TCP
// connection and reads and discards what the client still sends until the
// client closes or 2 s pass (see [CloseBeforeRead]); a request that arrives
// meanwhile, sent by a client that took the connection for reusable, is
// counted in [Counters].Unread and reported as a [ConnUnread] event (not
// over TLS, where it cannot be told from the client's close_notify). Over
// HTTP/2 it needs [RawHTTP2]: the response's frames, then the connection
// half-closed (TLS close_notify and TCP FIN), with no GOAWAY; [Server.Handle]
// panics with [HTTP2Only], and over [TLS] a request that negotiated HTTP/2
// is answered 501.
type RequestLimit struct {
	// N is the number of requests for the path each connection serves.
	// N >= 1.
	N int
	// Announce says so in the N-th response (Connection: close, GOAWAY).
	Announce bool
}

// IdleClose answers every request for its path 200 "ok"; a connection that
// then sits idle for Idle (no request in progress, none arriving) is closed
// by the server, as a server's keep-alive timeout does (Apache's
// KeepAliveTimeout, nginx's keepalive_timeout, a load balancer's idle
// timeout). Idle > 0.
//
// Over HTTP/1 the close is a FIN; the server then reads and discards what
// the client still sends until the client closes (so its close is seen, as
// with [Server.CloseWriteConn]) or 2 s pass. A request that arrives after
// the FIN, sent by a client that raced the close, is not read: it is
// counted in [Counters].Unread and reported as a [ConnUnread] event (not
// over TLS, where it cannot be told from the client's close_notify). Any
// byte the client sends before the timer fires is activity: the connection
// is not idle.
//
// Over the standard HTTP/2 server the close is the same half-close of the
// TCP connection, with no GOAWAY: the standard server sends GOAWAY for its
// own IdleTimeout only, which is one setting for the whole server, and
// gives no way to send one on a connection from outside. Any frame the
// client sends (a PING too) counts as activity; bytes that arrive after the
// FIN are neither counted nor reported.
// [RawHTTP2] does what net/http's server does at its IdleTimeout: GOAWAY
// (NO_ERROR, naming the last stream it processed), then the half-close; there
// only a new stream counts as activity, and a HEADERS frame after the close
// is counted in Unread.
type IdleClose struct {
	Idle time.Duration
}

// CloseMidBody answers 200 with Content-Length: Length, writes Send bytes,
// flushes and closes the connection, so the client's body read ends with
// io.ErrUnexpectedEOF. 0 <= Send < Length. Over the standard HTTP/2 server,
// which gives a handler no way to order a connection close after its data,
// the stream is reset (RST_STREAM(INTERNAL_ERROR)) after the data instead.
// Supported by [RawHTTP2], where the connection is half-closed after the
// data.
type CloseMidBody struct {
	Length, Send int
}

// StallMidBody answers 200 with Content-Length: Length, writes Send bytes,
// flushes, and then behaves like [Hang]. 0 <= Send < Length.
// Supported by [RawHTTP2].
type StallMidBody struct {
	Length, Send int
}

// Trickle answers 200 with Content-Length: Bytes and writes one byte every
// Interval, flushing each, the first at once. If the client goes away
// between bytes it counts as a cancellation, as in [Hang]. Bytes >= 0,
// Interval >= 0.
type Trickle struct {
	Bytes    int
	Interval time.Duration
}

// LargeBody answers 200 with a body of Size bytes (Content-Length: Size).
// A client that stops reading is not counted as a cancellation.
// Supported by [RawHTTP2].
type LargeBody struct {
	Size int
}

// ConnectionClose answers 200 "ok" with "Connection: close": over HTTP/1 the
// server closes the connection after the response. Over HTTP/2 the
// connection is shut down gracefully (GOAWAY covering this request, then
// closed when idle), as the standard HTTP/2 server does.
// Supported by [RawHTTP2].
type ConnectionClose struct{}

// Sequence gives the i-th request to the endpoint (counted from the
// [Server.Handle] call) Faults[i]; once they are used up the last one
// repeats. Faults must not be empty and must not contain a Sequence.
// Supported by [RawHTTP2] if all its faults are.
type Sequence struct {
	Faults []Fault
}

// Write models an endpoint with a side effect, for write-safety tests. Each
// request commits a write (counted in [Counters].WritesCommitted) unless it
// carries an Idempotency-Key (or, failing that, X-Idempotency-Key) header
// whose value the endpoint has already seen, in which case it is a
// duplicate and commits nothing. Either way it answers Status (200 if 0,
// otherwise 200..599), after reading up to 1 MiB of the request body, with
// an empty body, or with Report the writes the endpoint has committed so
// far, as text: "writes committed: 2" (see [Write.ReportBody]). Keys are remembered per endpoint across Handle calls, so
// Sequence{Faults: []Fault{Write{Status: 503}, Write{}}} commits once and
// answers 503, then answers 200 to the retry with the same key.
// Supported by [RawHTTP2] (which does not read request bodies).
type Write struct {
	Status int
	Report bool
}

// ReportBody is the body w answers with when Report is set, after n
// writes committed on its endpoint.
func (Write) ReportBody(n int64) string {
	return "writes committed: " + strconv.FormatInt(n, 10)
}

// GoAway is HTTP/2 only and needs [RawHTTP2]: after reading the request's
// headers the server sends GOAWAY with error code Code (0 is NO_ERROR) and a
// last-stream-id below this request's stream, so the request is reported as
// not processed and the client may retry it on a new connection. Later
// streams on that connection are ignored; the connection stays open until the
// client closes it. The request is counted as read.
type GoAway struct {
	Code uint32
}

// RSTStream is HTTP/2 only and needs [RawHTTP2]: after reading the
// request's headers the server resets its stream with RST_STREAM(Code),
// e.g. uint32(http2.ErrCodeRefusedStream), which the Go client retries, or
// http2.ErrCodeInternal, which it reports.
type RSTStream struct {
	Code uint32
}

var errRawOnly = errors.New("needs RawHTTP2")

func (OK) validate(mode) error { return nil }

func (f Status) validate(m mode) error {
	if f.Code < 200 || f.Code > 599 {
		return fmt.Errorf("Status.Code %d is not in 200..599", f.Code)
	}
	if f.After < 0 || (m.raw && f.After > 0) {
		return fmt.Errorf("Status.After %v: must not be negative, and 0 with RawHTTP2", f.After)
	}
	return nil
}

func (Hang) validate(mode) error { return nil }

func (f CloseBeforeResponse) validate(mode) error {
	if f.After < 0 {
		return fmt.Errorf("CloseBeforeResponse.After %d is negative", f.After)
	}
	return nil
}

func (f Reset) validate(mode) error {
	if f.After < 0 {
		return fmt.Errorf("Reset.After %d is negative", f.After)
	}
	return nil
}

func (f CloseMidBody) validate(mode) error {
	if f.Send < 0 || f.Send >= f.Length {
		return fmt.Errorf("CloseMidBody needs 0 <= Send < Length, got Send %d, Length %d", f.Send, f.Length)
	}
	return nil
}

func (f StallMidBody) validate(mode) error {
	if f.Send < 0 || f.Send >= f.Length {
		return fmt.Errorf("StallMidBody needs 0 <= Send < Length, got Send %d, Length %d", f.Send, f.Length)
	}
	return nil
}

func (f Trickle) validate(m mode) error {
	if m.raw {
		return errors.New("Trickle is not supported by RawHTTP2; use TLS for it over HTTP/2")
	}
	if f.Bytes < 0 || f.Interval < 0 {
		return fmt.Errorf("Trickle needs Bytes >= 0 and Interval >= 0, got %d, %v", f.Bytes, f.Interval)
	}
	return nil
}

func (f LargeBody) validate(mode) error {
	if f.Size < 0 {
		return fmt.Errorf("LargeBody.Size %d is negative", f.Size)
	}
	return nil
}

func (ConnectionClose) validate(mode) error { return nil }

func (f CloseBeforeRead) validate(m mode) error {
	if f.After < 1 {
		return fmt.Errorf("CloseBeforeRead.After %d is below 1: the connection is armed by a request it answered", f.After)
	}
	if m.tls && !m.raw {
		return errors.New("CloseBeforeRead needs plain HTTP/1 or RawHTTP2: over TLS the standard server's " +
			"connection sees encrypted records, in which a request cannot be told from a PING or a close_notify")
	}
	return nil
}

func (f GoDark) validate(mode) error {
	if f.After < 1 {
		return fmt.Errorf("GoDark.After %d is below 1: the connection goes dark after a response", f.After)
	}
	return nil
}

func (f RequestLimit) validate(m mode) error {
	if f.N < 1 {
		return fmt.Errorf("RequestLimit.N %d is below 1", f.N)
	}
	if !f.Announce && m.h2only && !m.raw {
		return errors.New("RequestLimit without Announce over HTTP/2 needs RawHTTP2: the standard server " +
			"cannot close a connection after a response without a GOAWAY")
	}
	return nil
}

func (f IdleClose) validate(mode) error {
	if f.Idle <= 0 {
		return fmt.Errorf("IdleClose.Idle %v is not positive", f.Idle)
	}
	return nil
}

func (f Sequence) validate(m mode) error {
	if len(f.Faults) == 0 {
		return errors.New("empty Sequence")
	}
	for i, g := range f.Faults {
		switch g.(type) {
		case nil:
			return fmt.Errorf("Sequence.Faults[%d] is nil", i)
		case Sequence, *Sequence:
			return fmt.Errorf("Sequence.Faults[%d] is a nested Sequence", i)
		}
		if err := g.validate(m); err != nil {
			return fmt.Errorf("Sequence.Faults[%d]: %w", i, err)
		}
	}
	return nil
}

func (f Write) validate(mode) error {
	if f.Status != 0 && (f.Status < 200 || f.Status > 599) {
		return fmt.Errorf("Write.Status %d is not 0 or in 200..599", f.Status)
	}
	return nil
}

func (GoAway) validate(m mode) error {
	if !m.raw {
		return fmt.Errorf("GoAway %w", errRawOnly)
	}
	return nil
}

func (RSTStream) validate(m mode) error {
	if !m.raw {
		return fmt.Errorf("RSTStream %w", errRawOnly)
	}
	return nil
}
