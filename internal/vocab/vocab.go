package vocab

// Kind names an event of a request's timeline.
type Kind string

// The event kinds, in the order a request usually sees them.
const (
	KindGetConn         Kind = "get-conn"          // the Transport starts acquiring a connection (GetConn)
	KindGotConn         Kind = "got-conn"          // a connection was acquired (GotConn)
	KindDNSStart        Kind = "dns-start"         // a DNS lookup started; Addr is the host
	KindDNSDone         Kind = "dns-done"          // a DNS lookup ended; N is the number of addresses
	KindConnectStart    Kind = "connect-start"     // a dial to one address started; Addr is "network addr"
	KindConnectDone     Kind = "connect-done"      // a dial to one address ended; Err is its error
	KindTLSStart        Kind = "tls-start"         // the TLS handshake started
	KindTLSDone         Kind = "tls-done"          // the TLS handshake ended; Addr is the ALPN protocol, N the TLS version
	KindWroteHeaders    Kind = "wrote-headers"     // the request headers were written
	KindWait100Continue Kind = "wait-100-continue" // the request waits for "100 Continue"
	KindGot1xx          Kind = "got-1xx"           // an informational response arrived; N is its code
	KindWroteRequest    Kind = "wrote-request"     // the whole request was written; Err is the write error
	KindFirstByte       Kind = "first-byte"        // the first byte of the response arrived
	KindResponse        Kind = "response"          // RoundTrip returned a response; N is its status code
	KindBodyEOF         Kind = "body-eof"          // the response body was read to EOF; N is the body bytes
	KindBodyClose       Kind = "body-close"        // the response body was closed; N is the bytes read
	KindPutIdleConn     Kind = "put-idle-conn"     // the connection went back to the idle pool; Err says why not
	KindDone            Kind = "done"              // the request ended; the timeline's outcome is final
	KindBodyHeld        Kind = "body-held"         // the body is still open past the warning threshold; N is its age in ns
	KindBodyCollected   Kind = "body-collected"    // the body was garbage collected without Close
	KindIdlePoolChurn   Kind = "idle-pool-churn"   // a pool closes connections for a full idle pool at a high rate; Addr is the host
)

// Kinds lists every kind, in the order above.
var Kinds = []Kind{
	KindGetConn, KindGotConn, KindDNSStart, KindDNSDone, KindConnectStart, KindConnectDone,
	KindTLSStart, KindTLSDone, KindWroteHeaders, KindWait100Continue, KindGot1xx, KindWroteRequest,
	KindFirstByte, KindResponse, KindBodyEOF, KindBodyClose, KindPutIdleConn, KindDone,
	KindBodyHeld, KindBodyCollected, KindIdlePoolChurn,
}

// KindSet is a set of event kinds.
type KindSet uint32

// AllKinds holds every kind.
const AllKinds = KindSet(1<<22 - 2)

// The bit of each kind in a KindSet, that of Kinds[i] being 1<<(i+1): what
// Bit returns, for code that knows an event's kind where it records it.
const (
	BitGetConn KindSet = 1 << (iota + 1)
	BitGotConn
	BitDNSStart
	BitDNSDone
	BitConnectStart
	BitConnectDone
	BitTLSStart
	BitTLSDone
	BitWroteHeaders
	BitWait100Continue
	BitGot1xx
	BitWroteRequest
	BitFirstByte
	BitResponse
	BitBodyEOF
	BitBodyClose
	BitPutIdleConn
	BitDone
	BitBodyHeld
	BitBodyCollected
	BitIdlePoolChurn
)

// Bit returns the bit of k in a KindSet, 0 for a kind not listed above.
func Bit(k Kind) KindSet {
	switch k {
	case KindGetConn:
		return BitGetConn
	case KindGotConn:
		return BitGotConn
	case KindDNSStart:
		return BitDNSStart
	case KindDNSDone:
		return BitDNSDone
	case KindConnectStart:
		return BitConnectStart
	case KindConnectDone:
		return BitConnectDone
	case KindTLSStart:
		return BitTLSStart
	case KindTLSDone:
		return BitTLSDone
	case KindWroteHeaders:
		return BitWroteHeaders
	case KindWait100Continue:
		return BitWait100Continue
	case KindGot1xx:
		return BitGot1xx
	case KindWroteRequest:
		return BitWroteRequest
	case KindFirstByte:
		return BitFirstByte
	case KindResponse:
		return BitResponse
	case KindBodyEOF:
		return BitBodyEOF
	case KindBodyClose:
		return BitBodyClose
	case KindPutIdleConn:
		return BitPutIdleConn
	case KindDone:
		return BitDone
	case KindBodyHeld:
		return BitBodyHeld
	case KindBodyCollected:
		return BitBodyCollected
	case KindIdlePoolChurn:
		return BitIdlePoolChurn
	}
	return 0
}

// Of returns the set of kinds.
func Of(kinds ...Kind) KindSet {
	var s KindSet
	for _, k := range kinds {
		s |= Bit(k)
	}
	return s
}

// Has reports whether s holds k.
func (s KindSet) Has(k Kind) bool { return s&Bit(k) != 0 }

// Class is the outcome class of a request.
type Class string

// The outcome classes.
const (
	ClassOK                    Class = "ok"                      // a response arrived (any status) and its body ended cleanly
	ClassConnectRefused        Class = "connect-refused"         // the dial was refused (ECONNREFUSED)
	ClassConnectTimeout        Class = "connect-timeout"         // the dial timed out (net.Dialer.Timeout)
	ClassConnect               Class = "connect"                 // the dial failed otherwise
	ClassDNS                   Class = "dns"                     // the name could not be resolved
	ClassTLSHandshakeTimeout   Class = "tls-handshake-timeout"   // Transport.TLSHandshakeTimeout fired
	ClassTLS                   Class = "tls"                     // the TLS handshake failed (certificate, alert, protocol)
	ClassResponseHeaderTimeout Class = "response-header-timeout" // Transport.ResponseHeaderTimeout fired
	ClassDeadline              Class = "deadline"                // the request's context deadline passed
	ClassCanceled              Class = "canceled"                // the request's context was cancelled
	ClassServerClosed          Class = "server-closed"           // the server closed the connection before a response
	ClassReset                 Class = "reset"                   // the connection was reset (ECONNRESET, EPIPE)
	ClassBodyTruncated         Class = "body-truncated"          // the body ended before its declared length
	ClassBodyIdleTimeout       Class = "body-idle-timeout"       // the body made no progress for the idle bound
	ClassGoAway                Class = "goaway"                  // an HTTP/2 server sent GOAWAY
	ClassStreamReset           Class = "stream-reset"            // an HTTP/2 server reset the stream (RST_STREAM)
	ClassProtocol              Class = "protocol"                // the server's reply was not valid HTTP
	ClassTimeout               Class = "timeout"                 // another timeout
	ClassError                 Class = "error"                   // any other failure
)

// Stage is the stage a request was in when it ended.
type Stage string

// The stages, in order.
const (
	StagePoolWait     Stage = "pool-wait"     // waiting for a connection from the pool
	StageDNS          Stage = "dns"           // resolving the host
	StageConnect      Stage = "connect"       // dialing
	StageTLS          Stage = "tls"           // in the TLS handshake
	StageWrite        Stage = "write"         // writing the request
	StageAwaitHeaders Stage = "await-headers" // waiting for the response headers
	StageBody         Stage = "body"          // reading the response body
)

// SetupStage reports whether st is a stage of setting a connection up:
// DNS, connect or TLS.
func SetupStage(st Stage) bool {
	return st == StageDNS || st == StageConnect || st == StageTLS
}

// ConnState is the state of a tracked connection.
type ConnState string

// The connection states. A connection goes dialing → (handshake) → idle or
// active → … → closed; a dial that fails goes dialing → failed.
const (
	StateDialing   ConnState = "dialing"   // the dial is in progress
	StateHandshake ConnState = "handshake" // TCP is up, the TLS handshake is in progress
	StateActive    ConnState = "active"    // serving a request (HTTP/2: at least one stream)
	StateIdle      ConnState = "idle"      // open, serving nothing
	StateClosed    ConnState = "closed"    // closed; see CloseReason
	StateFailed    ConnState = "failed"    // the dial failed
)

// Closer says which side closed a connection.
type Closer string

// The sides.
const (
	ClosedByClient Closer = "client"
	ClosedByServer Closer = "server"
)

// CloseReason says why a connection was closed.
type CloseReason string

// The close reasons. Client reasons first, then server reasons.
const (
	ReasonIdleTimeout      CloseReason = "idle-timeout"           // client: idle longer than IdleConnTimeout
	ReasonEarlyBodyClose   CloseReason = "early-body-close"       // client: a body was closed before EOF
	ReasonCloseIdle        CloseReason = "close-idle-connections" // client: CloseIdleConnections
	ReasonIdlePoolFull     CloseReason = "idle-pool-full"         // client: no room in the idle pool (for a connection returned, or a dial no request needed)
	ReasonRequestError     CloseReason = "request-error"          // client: the request on it failed (detail: its class)
	ReasonHandshakeFailed  CloseReason = "handshake-failed"       // client: the TLS handshake failed or timed out
	ReasonHandshakeAbandon CloseReason = "handshake-abandoned"    // client: the Transport cancelled the handshake, no request needing the connection
	ReasonKeepAlivesOff    CloseReason = "keep-alives-disabled"   // client: DisableKeepAlives, MaxIdleConnsPerHost < 0
	ReasonClient           CloseReason = "client-close"           // client: closed for another reason
	ReasonProtocolError    CloseReason = "protocol-error"         // client: gave it up over the server's protocol violation
	ReasonH2Unused         CloseReason = "h2-unused"              // client: an HTTP/2 connection dialed beside another and closed unused
	ReasonPingTimeout      CloseReason = "ping-timeout"           // client: its HTTP/2 health check's PING went unanswered
	ReasonConnectionClose  CloseReason = "connection-close"       // server: "Connection: close"
	ReasonHTTP10           CloseReason = "http1.0-no-keep-alive"  // server: HTTP/1.0 without keep-alive
	ReasonServerClosedIdle CloseReason = "server-closed-idle"     // server: closed while the connection was idle
	ReasonServerEOF        CloseReason = "server-eof"             // server: closed during a request
	ReasonServerReset      CloseReason = "server-reset"           // server: reset the connection
	ReasonServerGoAway     CloseReason = "goaway"                 // server: HTTP/2 GOAWAY (inferred)
)

// SideOf returns the side that closes a connection for reason r: each
// reason is the client's or the server's, as listed above.
func SideOf(r CloseReason) Closer {
	switch r {
	case ReasonConnectionClose, ReasonHTTP10, ReasonServerClosedIdle, ReasonServerEOF,
		ReasonServerReset, ReasonServerGoAway:
		return ClosedByServer
	}
	return ClosedByClient
}
