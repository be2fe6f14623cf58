// Package defaults builds fresh transports with http.DefaultTransport's
// settings, never touching http.DefaultTransport itself.
package defaults

import (
	"net"
	"net/http"
	"time"
)

// MaxResponseHeaderBytes bounds a response's headers, 1xx responses
// included (http.Transport.MaxResponseHeaderBytes): 1 MiB, where net/http's
// default is 10 MiB. Real servers send a few KiB; a reply with more is
// treated as hostile and fails (class "protocol") before it costs the
// client 10 MiB per connection.
const MaxResponseHeaderBytes = 1 << 20

// Dialer returns a dialer with http.DefaultTransport's settings: dials
// bounded by 30s, TCP keep-alives every 30s.
func Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}

// Transport returns a fresh transport with http.DefaultTransport's settings
// (a proxy from the environment, HTTP/2 attempted, at most 100 idle
// connections kept 90s, TLS handshakes bounded by 10s, a second to wait for
// "100 Continue"), dialing with d, and response headers bounded by
// [MaxResponseHeaderBytes].
func Transport(d *net.Dialer) *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}
