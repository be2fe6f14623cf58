package audit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/pool"
)

// subject is what the runner knows of the client under audit, read from
// the caller's transport before the pool tracks (and so clones and
// changes) it, and from the pool that tracks it ([subject.learn]). The
// reference pool's is the zero value with reference set.
type subject struct {
	reference bool
	// noH1 and noH2 say why the transport cannot speak HTTP/1 or HTTP/2
	// over TLS ("" when it can); fixH1 and fixH2 how to make it.
	noH1, fixH1 string
	noH2, fixH2 string
	// ownDial is set when the transport dials with a function of its own;
	// dial is the bound on DNS and connect the runner sees (a net.Dialer's
	// Timeout, the pool's ConnectTimeout), which is unknown when the
	// function is not a net.Dialer's. ownTLSDial is set when a function of
	// the transport's own makes the TLS connection (DialTLSContext), whose
	// handshake TLSHandshakeTimeout then does not bound.
	ownDial, ownTLSDial bool
	dial                bound
	// The transport's bounds, with the pool's options applied, and how
	// long it keeps idle connections; bodyIdle is the pool's body-idle
	// watchdog.
	rht, tlsht, idle, bodyIdle time.Duration
	// ping and pingTimeout are the transport's HTTP/2 health check
	// (Transport.HTTP2's SendPingTimeout and PingTimeout, the latter at
	// net/http's default when unset); 0 when it has none.
	ping, pingTimeout time.Duration
	// retryDefaults is set when the retry layer under audit runs at its
	// defaults (RetryAtDefaults).
	retryDefaults bool
	// ownLayer is set when the retry layer under audit is the caller's
	// (WithRetry, WithRetryTransport), not package retry's.
	ownLayer bool
	// kind is what the runner sees of a RoundTripper that is not an
	// *http.Transport itself (kindWrapped, kindHTTP2, kindOpaque; "" for
	// one that is), and sees says it in a result's note. connsUnseen is
	// set when the runner tracks none of its connections, boundsUnseen
	// when it sees none of its bounds.
	kind                      string
	sees                      string
	connsUnseen, boundsUnseen bool
	// keepsNone names the setting for which the transport keeps no
	// HTTP/1 connection for another request, as a fix says it
	// ("DisableKeepAlives", "MaxIdleConnsPerHost -1"); "" when it keeps
	// them.
	keepsNone string
}

// closesEach reports whether the transport closes every connection of
// protocol p once its request ended, whatever the request's fate: over
// HTTP/1 when it keeps none, over HTTP/2 with keep-alives off (a negative
// MaxIdleConnsPerHost does not concern HTTP/2). It may close it after the
// caller got its response (HTTP/2 once the reset of a stream it gave up is
// acknowledged).
func (s subject) closesEach(p Proto) bool {
	return s.keepsNone != "" && (p == HTTP1 || s.keepsNone == "DisableKeepAlives")
}

// keepsNoneOf names the setting for which t keeps no HTTP/1 connection
// for another request, "" when it keeps them: net/http's tryPutIdleConn
// refuses every connection with DisableKeepAlives or a negative
// MaxIdleConnsPerHost.
func keepsNoneOf(t *http.Transport) string {
	switch {
	case t.DisableKeepAlives:
		return "DisableKeepAlives"
	case t.MaxIdleConnsPerHost < 0:
		return fmt.Sprintf("MaxIdleConnsPerHost %d", t.MaxIdleConnsPerHost)
	}
	return ""
}

// defaultPingTimeout is how long net/http waits for a PING's answer when
// HTTP2Config.PingTimeout is unset.
const defaultPingTimeout = 15 * time.Second

// healthCheck returns how long after its last frame read the transport's
// HTTP/2 health check closes a connection that went dark, and its
// settings as a fix names them; 0 when it has none.
func (s subject) healthCheck() (time.Duration, string) {
	if s.ping <= 0 {
		return 0, ""
	}
	if s.kind == kindHTTP2 {
		return s.ping + s.pingTimeout, fmt.Sprintf("ReadIdleTimeout %v + PingTimeout %v", s.ping, s.pingTimeout)
	}
	return s.ping + s.pingTimeout, fmt.Sprintf("SendPingTimeout %v + PingTimeout %v", s.ping, s.pingTimeout)
}

// pingsOf returns t's HTTP/2 health check: SendPingTimeout, and
// PingTimeout as net/http applies it; zeros when it has none.
func pingsOf(t *http.Transport) (ping, timeout time.Duration) {
	if h := t.HTTP2; h != nil && h.SendPingTimeout > 0 {
		ping, timeout = h.SendPingTimeout, h.PingTimeout
		if timeout <= 0 {
			timeout = defaultPingTimeout
		}
	}
	return ping, timeout
}

// describe reads t's protocols and bounds as net/http will use them.
func describe(t *http.Transport) subject {
	s := subject{
		rht: t.ResponseHeaderTimeout, tlsht: t.TLSHandshakeTimeout, idle: t.IdleConnTimeout,
		ownDial: t.DialContext != nil || oldDial(t), ownTLSDial: t.DialTLSContext != nil || oldDialTLS(t),
		keepsNone: keepsNoneOf(t),
	}
	s.ping, s.pingTimeout = pingsOf(t)
	switch d := dialerOf(t.DialContext); {
	case !s.ownDial:
		// net/http dials with a zero net.Dialer: no timeout.
		s.dial = bound{name: "net.Dialer.Timeout", known: true}
	case d != nil:
		s.dial = bound{name: "net.Dialer.Timeout", d: d.Timeout, known: true}
	default:
		s.dial = bound{name: "the transport's DialContext"}
	}
	if t.Protocols != nil && !t.Protocols.HTTP1() {
		s.noH1 = fmt.Sprintf("its Protocols, %s, leaves HTTP1 out", t.Protocols)
		s.fixH1 = "call SetHTTP1(true) on its Protocols"
	}
	s.noH2, s.fixH2 = whyNoHTTP2(t)
	return s
}

// learn reads the bounds that the pool p tracking the transport applies:
// the transport's own, with the pool options given after the factory
// (pool.ConnectTimeout, pool.ResponseHeaderTimeout, pool.BodyIdleTimeout…).
func (s *subject) learn(p *pool.Pool) {
	if s.kind == "" || s.kind == kindWrapped {
		// Otherwise the pool's transport is a placeholder of its own.
		t := p.Transport()
		s.rht, s.tlsht, s.idle = t.ResponseHeaderTimeout, t.TLSHandshakeTimeout, t.IdleConnTimeout
		s.ping, s.pingTimeout = pingsOf(t)
		s.keepsNone = keepsNoneOf(t)
	}
	b := hook.Bounds(p)
	s.bodyIdle = b.BodyIdle
	if b.ConnectSet && !s.connsUnseen {
		s.dial = bound{name: nameConnectTimeout, d: b.Connect, known: true}
	}
}

// dialerMethod is the code of a net.Dialer's DialContext method value.
var dialerMethod = reflect.ValueOf((&net.Dialer{}).DialContext).Pointer()

// dialerOf returns the net.Dialer whose DialContext method f is (the
// common `(&net.Dialer{Timeout: …}).DialContext`, and
// http.DefaultTransport's), or nil for any other function. A method value
// is a closure of the method's code and its receiver, in that order, as
// the Go compiler has laid it out since Go 1.1; the code is checked first.
func dialerOf(f func(context.Context, string, string) (net.Conn, error)) *net.Dialer {
	if f == nil || reflect.ValueOf(f).Pointer() != dialerMethod {
		return nil
	}
	closure := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	return (*struct {
		code     uintptr
		receiver *net.Dialer
	})(closure).receiver
}

// whyNoHTTP2 says why t, as configured, does not speak HTTP/2 over TLS, by
// net/http's rules, and how to make it; both "" when it does.
func whyNoHTTP2(t *http.Transport) (why, fix string) {
	if godebug("http2client") == "0" {
		return "GODEBUG has http2client=0, which turns net/http's HTTP/2 client off",
			"remove http2client=0 from GODEBUG"
	}
	switch {
	case t.Protocols != nil:
		if !t.Protocols.HTTP2() {
			return fmt.Sprintf("its Protocols, %s, leaves HTTP2 out", t.Protocols),
				"call SetHTTP2(true) on its Protocols"
		}
		return "", ""
	case t.TLSNextProto != nil:
		if t.TLSNextProto["h2"] == nil {
			return `its TLSNextProto is a non-nil map without "h2", which turns HTTP/2 off`,
				"leave TLSNextProto nil, or set Protocols with HTTP2"
		}
		return "", ""
	case t.ForceAttemptHTTP2:
		return "", ""
	}
	var own []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"DialContext", t.DialContext != nil}, {"Dial", oldDial(t)},
		{"DialTLSContext", t.DialTLSContext != nil}, {"DialTLS", oldDialTLS(t)},
		{"TLSClientConfig", t.TLSClientConfig != nil},
	} {
		if f.set {
			own = append(own, f.name)
		}
	}
	if len(own) == 0 {
		return "", ""
	}
	return fmt.Sprintf("it has its own %s and ForceAttemptHTTP2 is false, so net/http does not attempt HTTP/2",
			strings.Join(own, " and ")),
		"set ForceAttemptHTTP2: true (or Protocols with HTTP2)"
}

// oldDial reports whether t sets the deprecated Dial, which net/http still
// reads.
func oldDial(t *http.Transport) bool {
	//lint:ignore SA1019 Dial is deprecated, not gone: net/http still reads it.
	return t.Dial != nil
}

// oldDialTLS reports whether t sets the deprecated DialTLS, which net/http
// still reads.
func oldDialTLS(t *http.Transport) bool {
	//lint:ignore SA1019 DialTLS is deprecated, not gone: net/http still reads it.
	return t.DialTLS != nil
}

// godebug returns the value of the GODEBUG setting name in the
// environment: the last one given, as the runtime reads it.
func godebug(name string) string {
	v := ""
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if k, val, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == name {
			v = val
		}
	}
	return v
}

// speaks reports whether the client can speak p, and if not why and how
// to make it.
func (s subject) speaks(p Proto) (ok bool, why, fix string) {
	if p == HTTP2 {
		return s.noH2 == "", s.noH2, s.fixH2
	}
	return s.noH1 == "", s.noH1, s.fixH1
}

// stageBound returns the transport's own bound on a stage, if the runner
// can see it: the dial's Timeout, TLSHandshakeTimeout,
// ResponseHeaderTimeout, the pool's body-idle watchdog; "" and 0 if it
// sees none. It ends a request at that stage whatever the scenario
// expects to end it (an attempt limit, a deadline) does or fails to do.
func (sub subject) stageBound(stage httptrace.Stage) (string, time.Duration) {
	b := sub.bounds(stage)
	if !b.known || b.d <= 0 {
		return "", 0
	}
	return b.name, b.d
}

// bounds returns what the runner knows of the transport's bound on stage:
// its length and the setting, nothing (known, 0), or that it cannot tell
// (a dial function of the transport's own).
func (sub subject) bounds(stage httptrace.Stage) bound {
	if sub.reference {
		// The reference pool's bounds are the scenario's, within the
		// scenario's own guard.
		return bound{known: true}
	}
	if sub.boundsUnseen && (stage != httptrace.StageBody || sub.bodyIdle <= 0) {
		// Whatever the RoundTripper does, the runner cannot see it.
		return bound{name: "the RoundTripper's own"}
	}
	switch stage {
	case httptrace.StageDNS, httptrace.StageConnect:
		if sub.ownTLSDial {
			return bound{name: "the transport's DialTLSContext"}
		}
		return sub.dial
	case httptrace.StageTLS:
		if sub.ownTLSDial {
			return bound{name: "the transport's DialTLSContext"}
		}
		return bound{name: "TLSHandshakeTimeout", d: sub.tlsht, known: true}
	case httptrace.StageAwaitHeaders:
		return bound{name: "ResponseHeaderTimeout", d: sub.rht, known: true}
	case httptrace.StageBody:
		return bound{name: nameBodyIdleTimeout, d: sub.bodyIdle, known: true}
	}
	// No http.Transport field bounds waiting for a connection or writing
	// the request.
	return bound{known: true}
}
