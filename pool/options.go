package pool

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/httptrace"
)

// Option configures a [Pool]. Options are applied in order; an option whose
// value makes no sense is an error from [New] or [Track].
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	maxConnsPerHost     *int
	maxIdleConnsPerHost *int
	connectTimeout      *time.Duration
	tlsHandshakeTimeout *time.Duration
	responseHeader      *time.Duration
	idleConnTimeout     *time.Duration
	tlsConfig           *tls.Config
	protocols           *http.Protocols
	disableKeepAlives   *bool
	http2               *http.HTTP2Config
	resolver            *net.Resolver
	// trace holds the options of the pool's tracer, which package
	// httptrace declares and validates.
	trace       []httptrace.Option
	keepClosed  int
	onConnClose func(Conn)
	onConnOpen  func(Conn)
}

func duration(name string, d time.Duration, dst **time.Duration) error {
	if d < 0 {
		return fmt.Errorf("pool: %s %v is negative", name, d)
	}
	*dst = &d
	return nil
}

// MaxConnsPerHost caps the connections per host, dialing and open
// together (http.Transport.MaxConnsPerHost). New's default is no cap, as
// is zero. HTTP/2 does not honour it as a cap (see [Stats.MaxOpen]).
func MaxConnsPerHost(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("pool: MaxConnsPerHost %d is negative", n)
		}
		c.maxConnsPerHost = &n
		return nil
	})
}

// MaxIdleConnsPerHost caps the idle connections kept per host
// (http.Transport.MaxIdleConnsPerHost); a connection returned to a full idle
// pool is closed with reason "idle-pool-full", as is a dial that ended once
// its request had another connection. New's default is 2, as is
// zero (http.DefaultMaxIdleConnsPerHost), which is not "keep none": to keep
// no idle connection, use [DisableKeepAlives].
func MaxIdleConnsPerHost(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("pool: MaxIdleConnsPerHost %d is negative", n)
		}
		c.maxIdleConnsPerHost = &n
		return nil
	})
}

// ConnectTimeout bounds one dial, DNS lookup included (net.Dialer.Timeout).
// New's default is 30s. Zero means no bound.
func ConnectTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return duration("ConnectTimeout", d, &c.connectTimeout) })
}

// TLSHandshakeTimeout bounds the TLS handshake of a new connection
// (http.Transport.TLSHandshakeTimeout). New's default is 10s. Zero means
// no bound.
func TLSHandshakeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return duration("TLSHandshakeTimeout", d, &c.tlsHandshakeTimeout) })
}

// ResponseHeaderTimeout bounds the wait for the response headers once the
// request was written (http.Transport.ResponseHeaderTimeout). New's default
// is no bound.
func ResponseHeaderTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return duration("ResponseHeaderTimeout", d, &c.responseHeader) })
}

// BodyIdleTimeout bounds the time the response body may make no progress:
// a per-request watchdog that cancels the request when no byte arrives for
// d, not a read deadline on the connection and not a total deadline. It is
// the pool's tracer's [httptrace.BodyIdleTimeout], passed through. No
// http.Transport field bounds this stage. Zero (the default) means no
// bound.
func BodyIdleTimeout(d time.Duration) Option { return tracer(httptrace.BodyIdleTimeout(d)) }

// IdleConnTimeout is how long an idle connection is kept before the
// Transport closes it (http.Transport.IdleConnTimeout); such a close has
// reason "idle-timeout". New's default is 90s. Zero means forever.
func IdleConnTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return duration("IdleConnTimeout", d, &c.idleConnTimeout) })
}

// TLSClientConfig sets the client TLS configuration (cloned).
func TLSClientConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *config) error {
		if cfg == nil {
			return errors.New("pool: nil TLS config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	})
}

// Protocols sets the protocols the Transport may speak
// (http.Transport.Protocols): HTTP/1 only, HTTP/2 only (over TLS, and
// unencrypted if set), or both. With HTTP/2 it is attempted even with a TLS
// configuration or dialer of the caller's (which turn net/http's automatic
// HTTP/2 off); without it, "h2" is no longer offered by ALPN either.
// Without this option, [New] speaks both and [Track] keeps the base's
// choice.
func Protocols(p http.Protocols) Option {
	return optionFunc(func(c *config) error {
		if !p.HTTP1() && !p.HTTP2() && !p.UnencryptedHTTP2() {
			return errors.New("pool: Protocols allows no protocol")
		}
		c.protocols = &p
		return nil
	})
}

// HTTP2 sets the Transport's HTTP/2 configuration (http.Transport.HTTP2,
// copied): its health check above all, SendPingTimeout (a PING after that
// long without a frame read) and PingTimeout (the connection closed when
// the PING's answer takes longer), without which a connection that went
// dark keeps taking requests.
func HTTP2(cfg http.HTTP2Config) Option {
	return optionFunc(func(c *config) error {
		if cfg.SendPingTimeout < 0 || cfg.PingTimeout < 0 {
			return fmt.Errorf("pool: HTTP2: SendPingTimeout %v and PingTimeout %v must not be negative",
				cfg.SendPingTimeout, cfg.PingTimeout)
		}
		c.http2 = &cfg
		return nil
	})
}

// DisableKeepAlives makes the Transport use each connection for one request.
func DisableKeepAlives(on bool) Option {
	return optionFunc(func(c *config) error {
		c.disableKeepAlives = &on
		return nil
	})
}

// Resolver sets the resolver of the dialer, for tests that exercise the DNS
// stage against a loopback DNS server. With [Track], it applies only when
// the base transport has no dial function of its own (DialContext or
// Dial), whose resolving is its own business.
func Resolver(r *net.Resolver) Option {
	return optionFunc(func(c *config) error {
		c.resolver = r
		return nil
	})
}

// The options below are the pool's tracer's, declared and validated by
// package httptrace (see each one's doc there): the pool passes them
// through, and a bad value is an error from [New] or [Track].

// tracer passes o, an option of the pool's tracer, through to it.
func tracer(o httptrace.Option) Option {
	return optionFunc(func(c *config) error {
		c.trace = append(c.trace, o)
		return nil
	})
}

// WithObserver adds o to the observers of the pool's requests
// ([httptrace.WithObserver]): each WithObserver adds one. An
// [httptrace.EventObserver] also receives the pool's warnings as events
// ("body-held", "body-collected", "idle-pool-churn"), which
// [httptrace.NewSlogObserver] logs.
func WithObserver(o httptrace.Observer) Option { return tracer(httptrace.WithObserver(o)) }

// SecretHeaders declares the named request headers secret, as
// Authorization, Proxy-Authorization and Cookie always are: their values
// are masked in every output ([httptrace.SecretHeaders]).
func SecretHeaders(names ...string) Option { return tracer(httptrace.SecretHeaders(names...)) }

// CaptureStacks records where each request was made, so that a body left
// open is reported with where it was opened ([OpenBody.Stack], the
// "body-held" warning), at the cost of a stack walk per request
// ([httptrace.CaptureStacks]).
func CaptureStacks() Option { return tracer(httptrace.CaptureStacks()) }

// UnclosedBodyWarning reports a response body still open d after its
// response arrived, and with [CaptureStacks] one garbage collected without
// Close, to the observers ([WithObserver]) as "body-held" and
// "body-collected" events ([httptrace.UnclosedBodyWarning]). The default
// is one minute; zero turns it off.
func UnclosedBodyWarning(d time.Duration) Option { return tracer(httptrace.UnclosedBodyWarning(d)) }

// KeepClosed sets how many closed connections the pool remembers for
// [Pool.Conns] (default 256). Counts in [Stats] are never forgotten.
func KeepClosed(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("pool: KeepClosed %d is negative", n)
		}
		c.keepClosed = n
		return nil
	})
}

// OnConnClose calls f with a snapshot of each connection once the pool has
// seen it close, with who closed it and why ([Conn.ClosedBy],
// [Conn.CloseReason]); a dial that failed is no connection and is not
// reported. It is how a connection's whole life reaches a metrics exporter
// without loss, however many connections close between two reads of
// [Pool.Conns], which remembers only the last [KeepClosed].
//
// f runs on the goroutine that closed the connection (often one of
// net/http's), without the pool's lock held, possibly concurrently for
// different connections; it must not block. The reason it sees is final
// except for a connection closed while its request was still in flight
// with reason "request-error", which the pool refines to the request's own
// cause when the request ends ([Stats] counts the refined reason).
func OnConnClose(f func(Conn)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("pool: nil OnConnClose function")
		}
		c.onConnClose = f
		return nil
	})
}

// OnConnOpen calls f with a snapshot of each connection once it is
// established: its dial done and, over TLS, its handshake. Its
// [Conn.DialedAt] and its first [StateChange] then say how long it took to
// set up, as [Stats.Setups] counts it; a dial or handshake that failed is
// not reported. It is how a metrics exporter records each connection's
// setup as it happens, as [OnConnClose] its life.
//
// f runs on the goroutine that opened the connection (often one of
// net/http's), without the pool's lock held, possibly concurrently for
// different connections; it must not block. A connection that closes as
// soon as it opened may reach OnConnClose's function first.
func OnConnOpen(f func(Conn)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("pool: nil OnConnOpen function")
		}
		c.onConnOpen = f
		return nil
	})
}
