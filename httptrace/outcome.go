package httptrace

import (
	"github.com/connaudit/connaudit/internal/vocab"
)

// Class is the outcome class of a request: "ok" for any HTTP response,
// whatever its status, or the kind of failure that ended it. The classes:
//
//	ok                       a response arrived (any status) and its body ended cleanly
//	connect-refused          the dial was refused (ECONNREFUSED)
//	connect-timeout          the dial timed out (net.Dialer.Timeout)
//	connect                  the dial failed otherwise
//	dns                      the name could not be resolved
//	tls-handshake-timeout    http.Transport.TLSHandshakeTimeout fired
//	tls                      the TLS handshake failed (certificate, alert, protocol)
//	response-header-timeout  http.Transport.ResponseHeaderTimeout fired
//	deadline                 the request's context deadline passed
//	canceled                 the request's context was cancelled
//	server-closed            the server closed the connection before a response
//	reset                    the connection was reset (ECONNRESET, EPIPE)
//	body-truncated           the body ended before its declared length
//	body-idle-timeout        the body made no progress for the idle bound ([BodyIdleTimeout])
//	goaway                   an HTTP/2 server sent GOAWAY
//	stream-reset             an HTTP/2 server reset the stream (RST_STREAM)
//	protocol                 the server's reply was not valid HTTP
//	timeout                  another timeout
//	error                    any other failure
//
// Compare with the constants: tl.Outcome.Class == httptrace.ClassReset.
type Class = vocab.Class

// Stage is the stage a request was in when it ended. The stages, in order:
//
//	pool-wait      waiting for a connection from the pool
//	dns            resolving the host
//	connect        dialing
//	tls            in the TLS handshake
//	write          writing the request
//	await-headers  waiting for the response headers
//	body           reading the response body
type Stage = vocab.Stage

// The outcome classes, as [Class] lists them.
const (
	ClassOK                    Class = vocab.ClassOK                    // a response arrived (any status) and its body ended cleanly
	ClassConnectRefused        Class = vocab.ClassConnectRefused        // the dial was refused (ECONNREFUSED)
	ClassConnectTimeout        Class = vocab.ClassConnectTimeout        // the dial timed out (net.Dialer.Timeout)
	ClassConnect               Class = vocab.ClassConnect               // the dial failed otherwise
	ClassDNS                   Class = vocab.ClassDNS                   // the name could not be resolved
	ClassTLSHandshakeTimeout   Class = vocab.ClassTLSHandshakeTimeout   // Transport.TLSHandshakeTimeout fired
	ClassTLS                   Class = vocab.ClassTLS                   // the TLS handshake failed (certificate, alert, protocol)
	ClassResponseHeaderTimeout Class = vocab.ClassResponseHeaderTimeout // Transport.ResponseHeaderTimeout fired
	ClassDeadline              Class = vocab.ClassDeadline              // the request's context deadline passed
	ClassCanceled              Class = vocab.ClassCanceled              // the request's context was cancelled
	ClassServerClosed          Class = vocab.ClassServerClosed          // the server closed the connection before a response
	ClassReset                 Class = vocab.ClassReset                 // the connection was reset (ECONNRESET, EPIPE)
	ClassBodyTruncated         Class = vocab.ClassBodyTruncated         // the body ended before its declared length
	ClassBodyIdleTimeout       Class = vocab.ClassBodyIdleTimeout       // the body made no progress for the idle bound
	ClassGoAway                Class = vocab.ClassGoAway                // an HTTP/2 server sent GOAWAY
	ClassStreamReset           Class = vocab.ClassStreamReset           // an HTTP/2 server reset the stream (RST_STREAM)
	ClassProtocol              Class = vocab.ClassProtocol              // the server's reply was not valid HTTP
	ClassTimeout               Class = vocab.ClassTimeout               // another timeout
	ClassError                 Class = vocab.ClassError                 // any other failure
)

// The stages, in order, as [Stage] lists them.
const (
	StagePoolWait     Stage = vocab.StagePoolWait     // waiting for a connection from the pool
	StageDNS          Stage = vocab.StageDNS          // resolving the host
	StageConnect      Stage = vocab.StageConnect      // dialing
	StageTLS          Stage = vocab.StageTLS          // in the TLS handshake
	StageWrite        Stage = vocab.StageWrite        // writing the request
	StageAwaitHeaders Stage = vocab.StageAwaitHeaders // waiting for the response headers
	StageBody         Stage = vocab.StageBody         // reading the response body
)

// Outcome is how a request ended: exactly one per timeline.
type Outcome struct {
	// Class is the outcome class.
	Class Class
	// Stage is the stage that was active when the request ended.
	Stage Stage
	// Status is the HTTP status code, when a response arrived.
	Status int
	// Err is the error that ended the request, nil for class "ok".
	Err error
}

// ErrBodyIdleTimeout is the cause with which a request is cancelled when its
// body made no progress for the body idle bound ([BodyIdleTimeout]).
var ErrBodyIdleTimeout = vocab.ErrBodyIdleTimeout

// Classify returns the class of a request that ended with err while at
// stage ("" when unknown). It reads typed errors first (errors.Is,
// errors.As, net.Error.Timeout) and falls back to error text only where
// net/http exposes nothing else. A nil err is "ok".
//
// Classify cannot tell a deadline of the caller's context from a timeout of
// the same shape inside the Transport; a [Transport] asks the request's
// context first.
func Classify(err error, stage Stage) Class { return vocab.Classify(err, stage) }
