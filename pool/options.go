package pool

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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
	bodyIdle            time.Duration
	tlsConfig           *tls.Config
	http2               *bool
	disableKeepAlives   *bool
	resolver            *net.Resolver
	observer            httptrace.Observer
	captureStacks       bool
	secretHeaders       []string
	unclosedReport      func(UnclosedBodyReport)
	keepClosed          int
}

func duration(name string, d time.Duration, dst **time.Duration) error {
	if d < 0 {
		return fmt.Errorf("pool: %s %v is negative", name, d)
	}
	*dst = &d
	return nil
}

// MaxConnsPerHost caps the connections per host, dialing and open
// together (http.Transport.MaxConnsPerHost). New's default is 1. Zero
// means no cap. HTTP/2 does not honour it as a cap (see [Stats.MaxOpen]).
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
// pool is closed with reason [ReasonIdlePoolFull]. New's default is the
// MaxConnsPerHost value, or 2 without a cap. Zero is net/http's default,
// which is 2 (http.DefaultMaxIdleConnsPerHost), not "keep none": to keep
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

// BodyIdleTimeout bounds the time the response body may make no progress
// ([httptrace.WithBodyIdleTimeout]): a per-request watchdog that cancels the
// request, not a read deadline on the connection and not a total deadline.
// Zero (the default) means no bound.
func BodyIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("pool: BodyIdleTimeout %v is negative", d)
		}
		c.bodyIdle = d
		return nil
	})
}

// IdleConnTimeout is how long an idle connection is kept before the
// Transport closes it (http.Transport.IdleConnTimeout); such a close has
// reason [ReasonIdleTimeout]. New's default is 90s. Zero means forever.
func IdleConnTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return duration("IdleConnTimeout", d, &c.idleConnTimeout) })
}

// TLSConfig sets the client TLS configuration (cloned).
func TLSConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *config) error {
		if cfg == nil {
			return errors.New("pool: nil TLS config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	})
}

// HTTP2 enables (the default for New) or disables HTTP/2 over TLS.
func HTTP2(on bool) Option {
	return optionFunc(func(c *config) error {
		c.http2 = &on
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

// WithObserver also hands every finished timeline to o.
func WithObserver(o httptrace.Observer) Option {
	return optionFunc(func(c *config) error {
		if o == nil {
			return errors.New("pool: nil observer")
		}
		c.observer = o
		return nil
	})
}

// SecretHeaders declares the named request headers secret, as
// Authorization, Proxy-Authorization and Cookie always are: their values
// are masked in every error text ([httptrace.WithSecretHeaders]).
func SecretHeaders(names ...string) Option {
	return optionFunc(func(c *config) error {
		for _, n := range names {
			if n == "" {
				return errors.New("pool: empty secret header name")
			}
		}
		c.secretHeaders = append(c.secretHeaders, names...)
		return nil
	})
}

// CaptureStacks records the caller's stack when a response body is handed
// out, so that a body left open is reported with where it was opened. It
// costs a stack walk per request.
func CaptureStacks() Option {
	return optionFunc(func(c *config) error {
		c.captureStacks = true
		return nil
	})
}

// UnclosedBodyReports calls report once per call site for response bodies
// garbage collected without being closed. Call sites are known with
// [CaptureStacks]; without it all such bodies share one site.
func UnclosedBodyReports(report func(UnclosedBodyReport)) Option {
	return optionFunc(func(c *config) error {
		if report == nil {
			return errors.New("pool: nil unclosed-body report")
		}
		c.unclosedReport = report
		return nil
	})
}

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
