package pool

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"time"
)

// dialFunc is the type of http.Transport's DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// setTransport applies the options' settings to tr, a transport of the
// pool's own, and to dialer, the net.Dialer that dial (the dial function
// the pool wraps) belongs to, if any; it returns dial, bounded by
// ConnectTimeout when the dial function is the caller's own.
func (cfg config) setTransport(tr *http.Transport, dial dialFunc, dialer *net.Dialer) dialFunc {
	if cfg.maxConnsPerHost != nil {
		tr.MaxConnsPerHost = *cfg.maxConnsPerHost
	}
	if cfg.maxIdleConnsPerHost != nil {
		tr.MaxIdleConnsPerHost = *cfg.maxIdleConnsPerHost
	}
	if cfg.connectTimeout != nil {
		dial = connectTimeout(dial, dialer, *cfg.connectTimeout)
	}
	if cfg.resolver != nil && dialer != nil {
		dialer.Resolver = cfg.resolver
	}
	if cfg.tlsHandshakeTimeout != nil {
		tr.TLSHandshakeTimeout = *cfg.tlsHandshakeTimeout
	}
	if cfg.responseHeader != nil {
		tr.ResponseHeaderTimeout = *cfg.responseHeader
	}
	if cfg.idleConnTimeout != nil {
		tr.IdleConnTimeout = *cfg.idleConnTimeout
	}
	if cfg.tlsConfig != nil {
		tr.TLSClientConfig = cfg.tlsConfig.Clone()
	}
	if cfg.disableKeepAlives != nil {
		tr.DisableKeepAlives = *cfg.disableKeepAlives
	}
	if cfg.http2 != nil {
		h := *cfg.http2
		tr.HTTP2 = &h
	}
	if pr := cfg.protocols; pr != nil {
		if pr.HTTP2() || pr.UnencryptedHTTP2() {
			enableHTTP2(tr)
		} else {
			disableHTTP2(tr)
		}
		tr.Protocols = new(http.Protocols)
		*tr.Protocols = *pr
	}
	return dial
}

// connectTimeout bounds each dial by d (0: no bound): as dialer's Timeout
// when dial is a net.Dialer's, else by a context deadline around dial, the
// caller's own function.
func connectTimeout(dial dialFunc, dialer *net.Dialer, d time.Duration) dialFunc {
	if dialer != nil {
		dialer.Timeout = d
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return dial(ctx, network, addr)
	}
}

// enableHTTP2 turns HTTP/2 over TLS on for tr, a transport of the pool's
// own, even with a TLS configuration or dialer of the caller's, which turn
// net/http's automatic HTTP/2 off.
func enableHTTP2(tr *http.Transport) {
	tr.ForceAttemptHTTP2 = true
	if tr.Protocols != nil {
		pr := *tr.Protocols
		pr.SetHTTP2(true)
		tr.Protocols = &pr
	}
	if tr.TLSNextProto != nil && tr.TLSNextProto["h2"] == nil {
		// An empty map turns HTTP/2 off; nil lets net/http set it up.
		tr.TLSNextProto = nil
	}
}

// disableHTTP2 turns HTTP/2 off on tr, a transport of the pool's own. An
// empty TLSNextProto alone is not enough: a TLS config that still offers
// "h2" by ALPN (as the clone of a transport that attempted HTTP/2 does) lets
// the server choose HTTP/2, which the Transport then reads as HTTP/1.
func disableHTTP2(tr *http.Transport) {
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if tr.Protocols != nil {
		pr := *tr.Protocols
		pr.SetHTTP2(false)
		tr.Protocols = &pr
	}
	if c := tr.TLSClientConfig; c != nil && slices.Contains(c.NextProtos, "h2") {
		c = c.Clone() // shares NextProtos' array with the caller's config: copy it
		c.NextProtos = slices.DeleteFunc(slices.Clone(c.NextProtos), func(p string) bool { return p == "h2" })
		tr.TLSClientConfig = c
	}
}
