package faultserver

import (
	"crypto/tls"
	"errors"
)

// An Option configures a [Server] at [NewUnstarted] or [New]. Options are
// built only by this package: [TLS], [HTTP2Only], [RawHTTP2], [Addr],
// [Certificate] and [OnConnEvent].
type Option interface {
	apply(*config)
}

// config is what the options set; the zero value is the default: plain
// HTTP on 127.0.0.1 with a system-chosen port.
type config struct {
	addr   string
	tls    bool
	h2only bool
	rawH2  bool
	cert   *tls.Certificate // Certificate
	events func(ConnEvent)  // OnConnEvent
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Addr makes the server listen on addr ("host:port") instead of
// "127.0.0.1:0". The host must be a loopback address: an IP address in
// 127.0.0.0/8, "::1", or "localhost" (which listens on 127.0.0.1 without a
// name lookup). Any other host, including an empty one, makes
// [NewUnstarted] fail. The port may be "0" for a system-chosen port.
func Addr(addr string) Option {
	return optionFunc(func(c *config) { c.addr = addr })
}

// TLS makes the server speak HTTPS with a fresh certificate for 127.0.0.1,
// ::1 and localhost, signed by a fresh CA. Its ALPN offers "h2" and "http/1.1", so a
// client that attempts HTTP/2 is served by the standard library's HTTP/2
// server. Use [Server.ClientTLSConfig] to trust the CA.
func TLS() Option {
	return optionFunc(func(c *config) { c.tls = true })
}

// HTTP2Only implies [TLS] and makes the server's ALPN offer only
// "h2", and the server speak only HTTP/2. A client that offers other
// protocols but not h2 fails the TLS handshake; one that offers no ALPN or
// only "http/1.1" (as net/http's HTTP/1 client does) completes it, and the
// server then closes the connection.
func HTTP2Only() Option {
	return optionFunc(func(c *config) { c.tls, c.h2only = true, true })
}

// RawHTTP2 implies [HTTP2Only] and serves HTTP/2 with this package's
// own frame-level server instead of the standard library's. It is the only
// mode in which [GoAway] and [RSTStream] can be handled. It supports the
// faults whose doc says so; [Server.Handle] panics for the others. It ignores
// request bodies (their flow-control credit is returned) and uses the
// default HTTP/2 settings.
func RawHTTP2() Option {
	return optionFunc(func(c *config) { c.tls, c.h2only, c.rawH2 = true, true, true })
}

func buildConfig(opts []Option) (config, error) {
	c := config{addr: "127.0.0.1:0"}
	for _, o := range opts {
		if o == nil {
			return c, errors.New("faultserver: nil Option")
		}
		o.apply(&c)
	}
	return c, nil
}
