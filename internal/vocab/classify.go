package vocab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// ErrBodyIdleTimeout is the cause with which a request is cancelled when its
// body made no progress for the body idle bound (httptrace.BodyIdleTimeout).
var ErrBodyIdleTimeout = errors.New("httptrace: response body idle timeout")

// ErrBadStatus is the outcome error of a response whose status code is
// not a three-digit code from 100 up.
var ErrBadStatus = errors.New("httptrace: invalid response status code")

// ErrTooMany1xx ends a request whose informational (1xx) responses
// exceeded the response header bound (see recorder.got1xxResponse).
var ErrTooMany1xx = errors.New("httptrace: informational (1xx) responses exceeded the response header limit")

// Classify returns the class of a request that ended with err while at
// stage. It reads typed errors first (errors.Is, errors.As,
// net.Error.Timeout); it falls back to error text only where net/http
// exposes nothing else, and each such case is marked below. A nil err is
// [ClassOK].
//
// Classify cannot tell a deadline of the caller's context from a timeout of
// the same shape inside the Transport; the tracer asks the request's
// context first and uses [ClassifyContext].
func Classify(err error, stage Stage) Class {
	if err == nil {
		return ClassOK
	}
	if errors.Is(err, ErrBodyIdleTimeout) {
		return ClassBodyIdleTimeout
	}
	if errors.Is(err, context.Canceled) {
		return ClassCanceled
	}
	if errors.Is(err, ErrTooMany1xx) || errors.Is(err, ErrBadStatus) {
		return ClassProtocol
	}
	// http.Client's *url.Error quotes the request's URL, which must not
	// be read as the error's text: the classes read from text below come
	// from what it wraps.
	for {
		ue, ok := err.(*url.Error)
		if !ok || ue.Err == nil {
			break
		}
		err = ue.Err
	}
	msg := err.Error()
	// net/http's errTimeout and http2's errTimeout are unexported; their
	// text is the only handle ("net/http: timeout awaiting response
	// headers", "http2: timeout awaiting response headers").
	if strings.Contains(msg, "timeout awaiting response headers") {
		return ClassResponseHeaderTimeout
	}
	// tlsHandshakeTimeoutError is unexported; its text is fixed.
	if strings.Contains(msg, "TLS handshake timeout") {
		return ClassTLSHandshakeTimeout
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return ClassDNS
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return ClassConnectRefused
	}
	var opErr *net.OpError
	isDial := errors.As(err, &opErr) && opErr.Op == "dial"
	if isDial && isTimeout(err) {
		return ClassConnectTimeout
	}
	if isTLSError(err) {
		return ClassTLS
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassDeadline
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return ClassReset
	}
	// The HTTP/2 stream and connection errors of the bundled http2 are
	// unexported types; their text is stable.
	switch {
	case strings.Contains(msg, "GOAWAY"):
		return ClassGoAway
	case strings.Contains(msg, "stream error:") || strings.Contains(msg, "RST_STREAM"):
		return ClassStreamReset
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		if stage == StageBody {
			return ClassBodyTruncated
		}
		return ClassServerClosed
	}
	// The bundled http2's connection errors are unexported too: "force
	// closed via ClientConn.Close" is what the other streams of a
	// connection get when a write on it failed because the server broke
	// it; "client connection lost" is a connection whose PINGs went
	// unanswered (ReadIdleTimeout, PingTimeout).
	if strings.Contains(msg, "client connection lost") {
		return ClassTimeout
	}
	if errors.Is(err, io.EOF) || strings.Contains(msg, "server closed idle connection") ||
		strings.Contains(msg, "force closed via ClientConn.Close") {
		// errServerClosedIdle is unexported; its text is fixed.
		return ClassServerClosed
	}
	if isDial {
		return ClassConnect
	}
	if isTimeout(err) {
		switch stage {
		case StageConnect:
			return ClassConnectTimeout
		case StageTLS:
			return ClassTLSHandshakeTimeout
		}
		return ClassTimeout
	}
	// Malformed replies come back as unexported errors whose text starts
	// with "malformed" or contains "invalid" (badStringError and friends).
	// "readLoopPeekFailLocked" is net/http's error for a connection on
	// which the server sent bytes before any request was written (an
	// "Unsolicited response").
	// "connection error: FLOW_CONTROL_ERROR" is the bundled http2's
	// ConnectionError (unexported): the client found the server breaking
	// the protocol and closed the connection.
	if strings.Contains(msg, "malformed") || strings.Contains(msg, "invalid") ||
		strings.HasPrefix(msg, "connection error: ") || strings.Contains(msg, ": connection error: ") ||
		strings.Contains(msg, "too large") || strings.Contains(msg, "HTTP/1.x transport connection broken") ||
		strings.Contains(msg, "readLoopPeekFailLocked") {
		return ClassProtocol
	}
	return ClassError
}

// ClassifyContext is [Classify] for a request made with ctx: a request whose
// own context ended is [ClassDeadline] or [ClassCanceled] (or
// [ClassBodyIdleTimeout] when that was the cause), whatever the error
// through which the Transport reported it. A context cancelled with a cause
// that is a [context.DeadlineExceeded] (errors.Is) ended by a deadline: a
// caller may time requests with one timer of its own rather than a context
// deadline each.
func ClassifyContext(ctx context.Context, err error, stage Stage) Class {
	if err == nil {
		return ClassOK
	}
	if ctx != nil && ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, ErrBodyIdleTimeout) || errors.Is(err, ErrBodyIdleTimeout):
			return ClassBodyIdleTimeout
		case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded):
			return ClassDeadline
		default:
			return ClassCanceled
		}
	}
	return Classify(err, stage)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTLSError(err error) bool {
	var (
		rh    tls.RecordHeaderError
		alert tls.AlertError
		cv    *tls.CertificateVerificationError
		ua    x509.UnknownAuthorityError
		hn    x509.HostnameError
		ci    x509.CertificateInvalidError
		ech   *tls.ECHRejectionError
	)
	if errors.As(err, &rh) || errors.As(err, &alert) || errors.As(err, &cv) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &ech) {
		return true
	}
	// crypto/tls reports many handshake failures as plain errors whose
	// text starts with "tls: " (and alerts from the peer as "remote error:
	// tls: ...").
	msg := err.Error()
	return strings.Contains(msg, "tls: ")
}
