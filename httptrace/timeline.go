package httptrace

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Timeline is the record of one request: its events in the order they were
// recorded, and what they established.
//
// A Timeline handed to [Observer.Observe] belongs to the recorder: read it
// during the call and keep a [Timeline.Clone] if you need it afterwards.
type Timeline struct {
	// ID is unique among the timelines of this process.
	ID uint64
	// Attempt is the attempt number of a retry policy of this module, 0 if none.
	Attempt int
	// Method is the request method.
	Method string
	// Host is the request's host (with port, if the URL had one).
	Host string
	// Start is when RoundTrip was called; event offsets are relative to it.
	Start time.Time
	// Events are the recorded events, in order.
	Events []Event
	// Dropped counts events not stored because the timeline was full.
	Dropped int

	// Conn describes the connection that served the request (the last one,
	// after a hidden retry).
	Conn ConnInfo
	// DNS describes the lookup made for this request, if any.
	DNS DNSInfo
	// TLS describes the handshake made for this request, if any.
	TLS TLSInfo
	// Status is the response status code, 0 without a response.
	Status int
	// Proto is the response protocol, such as "HTTP/1.1" or "HTTP/2.0".
	Proto string
	// ConnClose is set when the response asked for the connection to be
	// closed after it ("Connection: close", or HTTP/1.0 without
	// keep-alive).
	ConnClose bool
	// BodyBytes is the number of body bytes the caller read.
	BodyBytes int64
	// BodyEOF is set when the body was read to its end.
	BodyEOF bool
	// BodyClosed is set when the body was closed.
	BodyClosed bool
	// ClosedEarly is set when the body was closed before EOF, which makes
	// an HTTP/1 Transport close the connection.
	ClosedEarly bool
	// GetConns counts the times the Transport asked for a connection.
	// HTTP/2 asks twice for a request that opens a new connection, so
	// more than one is no retry by itself: see Retries.
	GetConns int
	// Retries counts the times the Transport sent the request again on
	// another connection after one had been handed to it: its hidden
	// retry, invisible to the caller.
	Retries int
	// Composed is set when the request carried the caller's own
	// ClientTrace, which was composed with the recorder's.
	Composed bool
	// Finished is set once the outcome is final.
	Finished bool
	// Outcome is how the request ended, valid once Finished.
	Outcome Outcome
	// Header holds the request header values recorded with
	// [Headers], redacted.
	Header map[string]string

	url *url.URL
	// stack is where the request was made (CaptureStacks); it points
	// into the recorder's own array until cloned.
	stack []uintptr
	// secrets are the request's header secrets (see requestSecrets),
	// kept when it failed or an event carries an error, whose text a
	// server may have filled with what it was sent.
	secrets []redact.Secret
	// ctx is the request's context as the caller gave it, for observers
	// of the module's own (see internal/hook); a clone has none.
	ctx context.Context
	// slot is the pool's record of the request (hook.Slot), kept from
	// request to request of a recycled recorder; a clone has none.
	slot any
}

// RedactError returns the text of err, an error of tl (its outcome's or an
// event's), redacted: tl's URL secrets and the request's credentials and
// secret headers masked (a server may quote what it was sent, and
// net/http's error quote that), control characters escaped.
func (tl *Timeline) RedactError(err error) string {
	if tl == nil {
		return ""
	}
	return redact.ErrorWith(err, tl.url, tl.secrets)
}

// URL returns the request URL, redacted: no user information, query values
// masked.
func (tl *Timeline) URL() string {
	if tl == nil || tl.url == nil {
		return ""
	}
	return redact.URL(tl.url)
}

// RawURL returns a copy of the request URL as the caller gave it, secrets
// included. Redact it (as [Timeline.URL] is) before it reaches any output.
func (tl *Timeline) RawURL() url.URL {
	if tl == nil || tl.url == nil {
		return url.URL{}
	}
	return *tl.url
}

// ConnInfo describes the connection that served a request.
type ConnInfo struct {
	// ID is the connection's id when a pool dialed it, else 0.
	ID uint64
	// Reused is GotConnInfo.Reused. It over-reports: a connection dialed
	// for this request that went idle before use counts as reused. Use
	// [ConnInfo.New] to know whether this request dialed.
	Reused bool
	// WasIdle is set when the connection came from the idle pool.
	WasIdle bool
	// IdleTime is how long the connection had been idle.
	IdleTime time.Duration
	// Local and Remote are the connection's addresses.
	Local, Remote net.Addr
	// Dialed is set when this request's own dial connected, so the
	// connection was new for it.
	Dialed bool
}

// New reports whether the request was served by a new connection: one its
// own dial made, or one that served no request before. A request that never
// got a connection was served by none, new or not.
func (c ConnInfo) New() bool {
	if c.Remote == nil && c.ID == 0 && !c.Dialed {
		return false
	}
	return c.Dialed || !c.Reused
}

// DNSInfo describes a DNS lookup.
type DNSInfo struct {
	Host  string
	Addrs []net.IPAddr
	Err   error
}

// TLSInfo describes a TLS handshake.
type TLSInfo struct {
	// Done is set when a handshake completed or failed for this request.
	Done        bool
	Version     uint16
	CipherSuite uint16
	ALPN        string
	Resumed     bool
	ServerName  string
	Err         error
}

// Clone returns a deep copy of tl that the caller may keep.
func (tl *Timeline) Clone() *Timeline {
	if tl == nil {
		return nil
	}
	c := *tl
	c.Events = slices.Clone(tl.Events)
	c.DNS.Addrs = slices.Clone(tl.DNS.Addrs)
	if tl.Header != nil {
		c.Header = make(map[string]string, len(tl.Header))
		for k, v := range tl.Header {
			c.Header[k] = v
		}
	}
	if tl.url != nil {
		u := *tl.url
		c.url = &u
	}
	c.stack = slices.Clone(tl.stack)
	c.ctx, c.slot = nil, nil
	return &c
}

// First returns the first event of kind k, if any.
func (tl *Timeline) First(k Kind) (Event, bool) {
	if tl == nil {
		return Event{}, false
	}
	for _, e := range tl.Events {
		if e.Kind == k {
			return e, true
		}
	}
	return Event{}, false
}

// Last returns the last event of kind k, if any.
func (tl *Timeline) Last(k Kind) (Event, bool) {
	if tl == nil {
		return Event{}, false
	}
	for i := len(tl.Events) - 1; i >= 0; i-- {
		if tl.Events[i].Kind == k {
			return tl.Events[i], true
		}
	}
	return Event{}, false
}

// Count returns the number of events of kind k.
func (tl *Timeline) Count(k Kind) int {
	if tl == nil {
		return 0
	}
	n := 0
	for _, e := range tl.Events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// Timings are the stage durations derived from a timeline's events. A stage
// the request did not go through is 0.
type Timings struct {
	// PoolWait is the time from GetConn to GotConn not spent in this
	// request's own DNS, connect and TLS ("get conn" in the waterfall).
	// For a request that took an idle connection or dialed its own it
	// is the Transport's own bookkeeping (queueing the request, starting
	// the dial, handing the connection over), tenths of a millisecond,
	// not contention; it is a wait for the pool only when the request
	// waited for a connection another request held, or for a dial slot
	// under MaxConnsPerHost.
	PoolWait time.Duration
	// DNS is DNSStart to DNSDone.
	DNS time.Duration
	// Connect is the first ConnectStart to the last ConnectDone.
	Connect time.Duration
	// TLS is TLSStart to TLSDone.
	TLS time.Duration
	// Write is GotConn to WroteRequest. When the request was reported
	// written only after its first response byte (HTTP/2 may report it
	// late; a server may answer before the body was all sent), it ends at
	// WroteHeaders instead, and when that too came after the first byte,
	// Write is 0 and Server counts from GotConn.
	Write time.Duration
	// Server is WroteRequest to the first response byte: server
	// processing plus one network round trip.
	Server time.Duration
	// Transfer is the first response byte to body EOF (or to body close
	// when the body was not read to its end).
	Transfer time.Duration
	// Total is the start to the end of the request.
	Total time.Duration
	// NewConn is set when the request was served by a new connection.
	NewConn bool
	// IdleFor is how long a reused connection had been idle.
	IdleFor time.Duration
}

// Timings derives the stage durations from the timeline's events, from one
// set of timestamps. Late events are ignored.
func (tl *Timeline) Timings() Timings {
	if tl == nil {
		return Timings{}
	}
	var (
		t                            Timings
		getConn, gotConn             = time.Duration(-1), time.Duration(-1)
		dnsStart, dnsDone            = time.Duration(-1), time.Duration(-1)
		connStart, connDone          = time.Duration(-1), time.Duration(-1)
		tlsStart, tlsDone            = time.Duration(-1), time.Duration(-1)
		wrote, first, eof, closed, d = time.Duration(-1), time.Duration(-1), time.Duration(-1), time.Duration(-1), time.Duration(-1)
		wroteHeaders                 = time.Duration(-1)
	)
	for i := range tl.Events {
		e := &tl.Events[i] // not a copy of each event: this runs per request
		if e.Late {
			continue
		}
		switch e.Kind {
		case vocab.KindGetConn:
			if getConn < 0 {
				getConn = e.At
			}
		case vocab.KindGotConn:
			gotConn = e.At
		case vocab.KindDNSStart:
			if dnsStart < 0 {
				dnsStart = e.At
			}
		case vocab.KindDNSDone:
			dnsDone = e.At
		case vocab.KindConnectStart:
			if connStart < 0 {
				connStart = e.At
			}
		case vocab.KindConnectDone:
			connDone = e.At
		case vocab.KindTLSStart:
			if tlsStart < 0 {
				tlsStart = e.At
			}
		case vocab.KindTLSDone:
			tlsDone = e.At
		case vocab.KindWroteHeaders:
			wroteHeaders = e.At
		case vocab.KindWroteRequest:
			wrote = e.At
		case vocab.KindFirstByte:
			if first < 0 {
				first = e.At
			}
		case vocab.KindBodyEOF:
			eof = e.At
		case vocab.KindBodyClose:
			closed = e.At
		case vocab.KindDone:
			d = e.At
		}
	}
	span := func(a, b time.Duration) time.Duration {
		if a < 0 || b < a {
			return 0
		}
		return b - a
	}
	t.DNS = span(dnsStart, dnsDone)
	t.Connect = span(connStart, connDone)
	t.TLS = span(tlsStart, tlsDone)
	acquire := span(getConn, gotConn)
	t.PoolWait = acquire
	if tl.Conn.Dialed {
		t.PoolWait = max(0, acquire-t.DNS-t.Connect-t.TLS)
	}
	if wrote < 0 || (first >= 0 && wrote > first) {
		// HTTP/2 reports the request written only after it let other
		// streams start, which can be after the response came, or even
		// after the request ended (a late event); the server may also
		// answer before the body was all sent. The headers written then
		// stand for the request written; if they too were reported too
		// late, the wait for the response counts from the connection.
		switch {
		case wroteHeaders >= 0 && (first < 0 || wroteHeaders <= first):
			wrote = wroteHeaders
		case first >= 0 && gotConn >= 0 && gotConn <= first:
			wrote = gotConn
		}
	}
	t.Write = span(gotConn, wrote)
	t.Server = span(wrote, first)
	if eof >= 0 {
		t.Transfer = span(first, eof)
	} else {
		t.Transfer = span(first, closed)
	}
	t.Total = span(0, d)
	t.NewConn = tl.Conn.New()
	if tl.Conn.WasIdle {
		t.IdleFor = tl.Conn.IdleTime
	}
	return t
}

// errNilTimeline is the error of a method called on a nil *Timeline.
var errNilTimeline = errors.New("httptrace: nil *Timeline")
