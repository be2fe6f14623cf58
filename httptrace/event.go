package httptrace

import (
	"net"
	"time"
)

// Kind names an event of a [Timeline].
type Kind uint8

// The event kinds, in the order a request usually sees them.
const (
	KindGetConn         Kind = iota + 1 // the Transport starts acquiring a connection (GetConn)
	KindGotConn                         // a connection was acquired (GotConn); see [ConnInfo]
	KindDNSStart                        // a DNS lookup started; Addr is the host
	KindDNSDone                         // a DNS lookup ended; N is the number of addresses
	KindConnectStart                    // a dial to one address started; Addr is "network addr"
	KindConnectDone                     // a dial to one address ended; Err is its error
	KindTLSStart                        // the TLS handshake started
	KindTLSDone                         // the TLS handshake ended; Addr is the ALPN protocol, N the TLS version; see [TLSInfo]
	KindWroteHeaders                    // the request headers were written
	KindWait100Continue                 // the request waits for "100 Continue"
	KindGot1xx                          // an informational response arrived; N is its code
	KindWroteRequest                    // the whole request was written; Err is the write error
	KindFirstByte                       // the first byte of the response arrived
	KindResponse                        // RoundTrip returned a response; N is its status code
	KindBodyEOF                         // the response body was read to EOF; N is the body bytes
	KindBodyClose                       // the response body was closed; N is the bytes read
	KindPutIdleConn                     // the connection went back to the idle pool; Err says why not
	KindDone                            // the request ended; the timeline's [Outcome] is final
	kindCount
)

var kindNames = [...]string{
	KindGetConn:         "get-conn",
	KindGotConn:         "got-conn",
	KindDNSStart:        "dns-start",
	KindDNSDone:         "dns-done",
	KindConnectStart:    "connect-start",
	KindConnectDone:     "connect-done",
	KindTLSStart:        "tls-start",
	KindTLSDone:         "tls-done",
	KindWroteHeaders:    "wrote-headers",
	KindWait100Continue: "wait-100-continue",
	KindGot1xx:          "got-1xx",
	KindWroteRequest:    "wrote-request",
	KindFirstByte:       "first-byte",
	KindResponse:        "response",
	KindBodyEOF:         "body-eof",
	KindBodyClose:       "body-close",
	KindPutIdleConn:     "put-idle-conn",
	KindDone:            "done",
}

// String returns the kind's stable name, such as "got-conn".
func (k Kind) String() string {
	if k > 0 && k < kindCount {
		return kindNames[k]
	}
	return "unknown"
}

// ParseKind returns the kind named s, as printed by [Kind.String].
func ParseKind(s string) (Kind, bool) {
	for k := KindGetConn; k < kindCount; k++ {
		if kindNames[k] == s {
			return k, true
		}
	}
	return 0, false
}

// Event is one thing that happened to a request.
//
// Its fields are laid out in 64 bytes, one cache line, Kind and Late side by
// side: a timeline's events are written on the request's path, one by one,
// by several goroutines.
type Event struct {
	Kind Kind
	// Late is set on events that arrived after the timeline was finished,
	// such as the end of a background dial for a request that was cancelled.
	Late bool
	// At is the offset from the timeline's start, from the monotonic clock.
	At time.Duration
	// Conn is the id of the connection the event concerns, when known (see
	// [ConnIdentifier]); 0 otherwise.
	Conn uint64
	// N is a number whose meaning depends on Kind (status code, bytes,
	// address count).
	N int64
	// Addr is the address the event concerns, if any: the host of a DNS
	// lookup, "network address" of a connect, the remote address of a
	// connection.
	Addr string
	// Err is the error the event carried, if any.
	Err error
}

// ConnIdentifier is implemented by connections that carry a stable id, such
// as those dialed by the pool package. The recorder looks through
// *tls.Conn and any other wrapper with a NetConn method to find it.
type ConnIdentifier interface {
	ConnID() uint64
}

// ConnID returns the id of c or of the connection it wraps, or 0.
func ConnID(c net.Conn) uint64 {
	for range 8 { // bounded: wrappers do not nest deeper in practice
		if c == nil {
			return 0
		}
		if id, ok := c.(ConnIdentifier); ok {
			return id.ConnID()
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return 0
		}
		c = w.NetConn()
	}
	return 0
}
