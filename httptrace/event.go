package httptrace

import (
	"net"
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
)

// Kind names an event of a [Timeline]. The kinds, in the order a request
// usually sees them, with what [Event.N] and [Event.Addr] hold:
//
//	get-conn           the Transport starts acquiring a connection (GetConn)
//	got-conn           a connection was acquired (GotConn); see [ConnInfo]
//	dns-start          a DNS lookup started; Addr is the host
//	dns-done           a DNS lookup ended; N is the number of addresses
//	connect-start      a dial to one address started; Addr is "network addr"
//	connect-done       a dial to one address ended; Err is its error
//	tls-start          the TLS handshake started
//	tls-done           the handshake ended; Addr is the ALPN protocol, N the TLS version
//	wrote-headers      the request headers were written
//	wait-100-continue  the request waits for "100 Continue"
//	got-1xx            an informational response arrived; N is its code
//	wrote-request      the whole request was written; Err is the write error
//	first-byte         the first byte of the response arrived
//	response           RoundTrip returned a response; N is its status code
//	body-eof           the response body was read to EOF; N is the body bytes
//	body-close         the response body was closed; N is the bytes read
//	put-idle-conn      the connection went back to the idle pool; Err says why not
//	done               the request ended; the timeline's [Outcome] is final
//	body-held          the body is still open past [UnclosedBodyWarning]; N is its age in ns
//	body-collected     the body was garbage collected without Close
//	idle-pool-churn    a pool closes connections for a full idle pool at a high rate; Addr is the
//	                   host, N the closes counted, Err says what was seen and what to raise
//
// The last three reach an [EventObserver] only: the first two while the
// timeline is not finished, the last, a pool's warning, on the timeline of
// the request the pool was serving when it noticed, without being one of
// that timeline's events.
// Compare with the constants: ev.Kind == httptrace.KindGotConn.
type Kind = vocab.Kind

// The event kinds, in the order a request usually sees them, as [Kind] lists them.
const (
	KindGetConn         Kind = vocab.KindGetConn         // the Transport starts acquiring a connection (GetConn)
	KindGotConn         Kind = vocab.KindGotConn         // a connection was acquired (GotConn)
	KindDNSStart        Kind = vocab.KindDNSStart        // a DNS lookup started; Addr is the host
	KindDNSDone         Kind = vocab.KindDNSDone         // a DNS lookup ended; N is the number of addresses
	KindConnectStart    Kind = vocab.KindConnectStart    // a dial to one address started; Addr is "network addr"
	KindConnectDone     Kind = vocab.KindConnectDone     // a dial to one address ended; Err is its error
	KindTLSStart        Kind = vocab.KindTLSStart        // the TLS handshake started
	KindTLSDone         Kind = vocab.KindTLSDone         // the TLS handshake ended; Addr is the ALPN protocol, N the TLS version
	KindWroteHeaders    Kind = vocab.KindWroteHeaders    // the request headers were written
	KindWait100Continue Kind = vocab.KindWait100Continue // the request waits for "100 Continue"
	KindGot1xx          Kind = vocab.KindGot1xx          // an informational response arrived; N is its code
	KindWroteRequest    Kind = vocab.KindWroteRequest    // the whole request was written; Err is the write error
	KindFirstByte       Kind = vocab.KindFirstByte       // the first byte of the response arrived
	KindResponse        Kind = vocab.KindResponse        // RoundTrip returned a response; N is its status code
	KindBodyEOF         Kind = vocab.KindBodyEOF         // the response body was read to EOF; N is the body bytes
	KindBodyClose       Kind = vocab.KindBodyClose       // the response body was closed; N is the bytes read
	KindPutIdleConn     Kind = vocab.KindPutIdleConn     // the connection went back to the idle pool; Err says why not
	KindDone            Kind = vocab.KindDone            // the request ended; the timeline's outcome is final
	KindBodyHeld        Kind = vocab.KindBodyHeld        // the body is still open past the warning threshold; N is its age in ns
	KindBodyCollected   Kind = vocab.KindBodyCollected   // the body was garbage collected without Close
	KindIdlePoolChurn   Kind = vocab.KindIdlePoolChurn   // a pool closes connections for a full idle pool at a high rate
)

// Event is one thing that happened to a request. It takes 80 bytes on a
// 64-bit platform.
type Event struct {
	Kind Kind
	// Late is set on events that arrived after the timeline was finished,
	// such as the end of a background dial for a request that was cancelled.
	Late bool
	// At is the offset from the timeline's start, from the monotonic clock.
	At time.Duration
	// Conn is the id of the connection the event concerns, when known (see
	// a pool); 0 otherwise.
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

// connID returns the id of c or of the connection it wraps, or 0: the id of
// a connection dialed by a pool, which has a ConnID method. It looks through
// *tls.Conn and any other wrapper with a NetConn method.
func connID(c net.Conn) uint64 {
	for range 8 { // bounded: wrappers do not nest deeper in practice
		if c == nil {
			return 0
		}
		if id, ok := c.(interface{ ConnID() uint64 }); ok {
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
