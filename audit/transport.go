package audit

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// subject is what the runner knows of the client under audit, read from
// the caller's transport before the pool tracks (and so clones and
// changes) it. The reference pool's is the zero value with reference set.
type subject struct {
	reference bool
	// noH1 and noH2 say why the transport cannot speak HTTP/1 or HTTP/2
	// over TLS ("" when it can); fixH1 and fixH2 how to make it.
	noH1, fixH1 string
	noH2, fixH2 string
	// ownDial is set when the transport dials with a function of its own,
	// whose bounds the runner cannot see.
	ownDial bool
	// The transport's bounds, and how long it keeps idle connections.
	rht, tlsht, idle time.Duration
}

// describe reads t's protocols and bounds as net/http will use them.
func describe(t *http.Transport) subject {
	s := subject{
		rht: t.ResponseHeaderTimeout, tlsht: t.TLSHandshakeTimeout, idle: t.IdleConnTimeout,
		ownDial: t.DialContext != nil || oldDial(t),
	}
	if t.Protocols != nil && !t.Protocols.HTTP1() {
		s.noH1 = fmt.Sprintf("its Protocols, %s, leaves HTTP1 out", t.Protocols)
		s.fixH1 = "call SetHTTP1(true) on its Protocols"
	}
	s.noH2, s.fixH2 = whyNoHTTP2(t)
	return s
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

// maxOwnGuard is the longest bound of the transport's own that the guard
// deadline waits for by default.
const maxOwnGuard = 10 * time.Second

// stageBound returns the transport's own bound on a stage, if the runner
// can see it: ResponseHeaderTimeout, TLSHandshakeTimeout. It ends a request
// at that stage whatever the scenario expects to end it (an attempt limit,
// a deadline) does or fails to do.
func (sub subject) stageBound(stage httptrace.Stage) (string, time.Duration) {
	if sub.reference {
		return "", 0
	}
	switch stage {
	case vocab.StageAwaitHeaders:
		return "ResponseHeaderTimeout", sub.rht
	case vocab.StageTLS:
		return "TLSHandshakeTimeout", sub.tlsht
	}
	return "", 0
}
