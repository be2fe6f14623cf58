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
	// by a server in the given mode.
	validate(raw bool) error
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
type CloseBeforeResponse struct {
	// After is how many requests for the path on each connection are
	// answered before the close; 0 closes on the first. After >= 0.
	After int
}

// Reset reads the request and aborts it abruptly. Over HTTP/1 the connection
// is hijacked, its linger set to 0 and closed, so the client gets a TCP RST
// (errors.Is(err, syscall.ECONNRESET)). Over HTTP/2 the stream is reset with
// RST_STREAM(INTERNAL_ERROR). Supported by [RawHTTP2].
//
// With After > 0 the first After requests for its path on each connection
// are answered 200 "ok", and the connection is reset right after reading
// the next one: [CloseBeforeResponse]'s After with an RST for the FIN.
type Reset struct {
	// After is how many requests for the path on each connection are
	// answered before the reset; 0 resets on the first. After >= 0.
	After int
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

func (OK) validate(bool) error { return nil }

func (f Status) validate(raw bool) error {
	if f.Code < 200 || f.Code > 599 {
		return fmt.Errorf("Status.Code %d is not in 200..599", f.Code)
	}
	if f.After < 0 || (raw && f.After > 0) {
		return fmt.Errorf("Status.After %v: must not be negative, and 0 with RawHTTP2", f.After)
	}
	return nil
}

func (Hang) validate(bool) error { return nil }

func (f CloseBeforeResponse) validate(bool) error {
	if f.After < 0 {
		return fmt.Errorf("CloseBeforeResponse.After %d is negative", f.After)
	}
	return nil
}

func (f Reset) validate(bool) error {
	if f.After < 0 {
		return fmt.Errorf("Reset.After %d is negative", f.After)
	}
	return nil
}

func (f CloseMidBody) validate(bool) error {
	if f.Send < 0 || f.Send >= f.Length {
		return fmt.Errorf("CloseMidBody needs 0 <= Send < Length, got Send %d, Length %d", f.Send, f.Length)
	}
	return nil
}

func (f StallMidBody) validate(bool) error {
	if f.Send < 0 || f.Send >= f.Length {
		return fmt.Errorf("StallMidBody needs 0 <= Send < Length, got Send %d, Length %d", f.Send, f.Length)
	}
	return nil
}

func (f Trickle) validate(raw bool) error {
	if raw {
		return errors.New("Trickle is not supported by RawHTTP2; use TLS for it over HTTP/2")
	}
	if f.Bytes < 0 || f.Interval < 0 {
		return fmt.Errorf("Trickle needs Bytes >= 0 and Interval >= 0, got %d, %v", f.Bytes, f.Interval)
	}
	return nil
}

func (f LargeBody) validate(bool) error {
	if f.Size < 0 {
		return fmt.Errorf("LargeBody.Size %d is negative", f.Size)
	}
	return nil
}

func (ConnectionClose) validate(bool) error { return nil }

func (f Sequence) validate(raw bool) error {
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
		if err := g.validate(raw); err != nil {
			return fmt.Errorf("Sequence.Faults[%d]: %w", i, err)
		}
	}
	return nil
}

func (f Write) validate(bool) error {
	if f.Status != 0 && (f.Status < 200 || f.Status > 599) {
		return fmt.Errorf("Write.Status %d is not 0 or in 200..599", f.Status)
	}
	return nil
}

func (GoAway) validate(raw bool) error {
	if !raw {
		return fmt.Errorf("GoAway %w", errRawOnly)
	}
	return nil
}

func (RSTStream) validate(raw bool) error {
	if !raw {
		return fmt.Errorf("RSTStream %w", errRawOnly)
	}
	return nil
}
