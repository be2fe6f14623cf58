package proxy

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	"github.com/connaudit/connaudit/pool"
)

// An Option configures a [Proxy]. A bad value is an error from [New].
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	listen       string
	tls          bool
	upstreamCA   *x509.CertPool
	clientHeader string
	rules        []Rule
	seed         uint64
	guard        time.Duration
	upstreamIdle time.Duration
	window       time.Duration
	bounds       Bounds
	poolOpts     []pool.Option
}

func defaultConfig() config {
	return config{listen: "127.0.0.1:0", window: 5 * time.Second}
}

// The downstream bounds' defaults; docs/proxy.md says why each.
const (
	defaultHeaderBound = time.Minute
	defaultIdleBound   = 15 * time.Minute
	defaultMaxConns    = 1024
)

// Bounds are the proxy's own limits on its downstream connections, which
// keep a hostile or broken client from holding it: a zero field takes its
// default. A connection closed at a bound is the proxy's close in the
// report ("proxy: header-timeout", "proxy: idle-timeout", "proxy:
// header-too-large", "proxy: conn-limit"), neither the client's nor the
// upstream's.
type Bounds struct {
	// Header bounds the wait for a request's header, from the first
	// byte read of it, or from the accept (a TLS handshake included) for
	// the first request of a connection (default 1m, as nginx's
	// client_header_timeout).
	Header time.Duration
	// Idle is how long a connection may sit idle between requests before
	// the proxy closes it (default 15m, or twice [UpstreamIdle] when that
	// is longer): the client sees it as the server's idle close.
	Idle time.Duration
	// HeaderBytes caps a request's header (default 1 MiB, net/http's):
	// past it, an HTTP/1.1 connection is answered 431 and closed.
	HeaderBytes int
	// Conns caps the downstream connections open at once (default
	// 1024): past it, a new one is closed as soon as it is accepted.
	Conns int
}

// DownstreamBounds sets the proxy's limits on its downstream
// connections; a zero field keeps its default.
func DownstreamBounds(b Bounds) Option {
	return optionFunc(func(c *config) error {
		if b.Header < 0 || b.Idle < 0 || b.HeaderBytes < 0 || b.Conns < 0 {
			return fmt.Errorf("proxy: negative bound in %+v", b)
		}
		c.bounds = b
		return nil
	})
}

// boundsInForce returns the downstream bounds in force, defaults filled in.
func (c *config) boundsInForce() Bounds {
	b := c.bounds
	if b.Header == 0 {
		b.Header = defaultHeaderBound
	}
	if b.Idle == 0 {
		b.Idle = max(defaultIdleBound, 2*c.upstreamIdle)
	}
	if b.HeaderBytes == 0 {
		b.HeaderBytes = http.DefaultMaxHeaderBytes
	}
	if b.Conns == 0 {
		b.Conns = defaultMaxConns
	}
	return b
}

// Listen sets the address the proxy listens on for the client under test
// (default 127.0.0.1:0, a free port).
func Listen(addr string) Option {
	return optionFunc(func(c *config) error {
		if addr == "" {
			return errors.New("proxy: empty listen address")
		}
		c.listen = addr
		return nil
	})
}

// DownstreamTLS makes the proxy speak TLS to the client, HTTP/2 or
// HTTP/1.1 as the client offers, with a certificate of a CA of its own
// ([Proxy.CA]) for 127.0.0.1, ::1 and localhost.
func DownstreamTLS() Option {
	return optionFunc(func(c *config) error { c.tls = true; return nil })
}

// UpstreamCA makes the proxy verify an HTTPS upstream against the
// certificates of caPEM alone (default: the system's roots).
func UpstreamCA(caPEM []byte) Option {
	return optionFunc(func(c *config) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return errors.New("proxy: the upstream CA holds no PEM certificate")
		}
		c.upstreamCA = pool
		return nil
	})
}

// ClientHeader names the request header whose value tells one client
// from another (default: the connection's source IP). A connection
// belongs to the client of its first request.
func ClientHeader(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" || textproto.CanonicalMIMEHeaderKey(name) == "" || !validToken(name) {
			return fmt.Errorf("proxy: %q is no header name", name)
		}
		c.clientHeader = textproto.CanonicalMIMEHeaderKey(name)
		return nil
	})
}

// Faults adds the rules the proxy injects faults by. A request or a
// connection no rule matches is never touched.
func Faults(rules ...Rule) Option {
	return optionFunc(func(c *config) error {
		for _, r := range rules {
			if r.action == "" {
				return errors.New("proxy: a zero Rule (use ParseRule)")
			}
		}
		c.rules = append(c.rules, rules...)
		return nil
	})
}

// Seed sets the seed of the rules' shares (default 0): runs with one
// seed and one order of requests fault the same ones.
func Seed(seed uint64) Option {
	return optionFunc(func(c *config) error { c.seed = seed; return nil })
}

// Guard sets how long a request may be held before the proxy cuts it and
// judges it unbounded: the client set no bound that ended it (default 0:
// none is cut).
func Guard(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("proxy: negative guard %v", d)
		}
		c.guard = d
		return nil
	})
}

// UpstreamIdle states the upstream's keep-alive idle timeout, which a
// client that keeps connections idle longer is judged against (default:
// the shortest idle the upstream was seen closing a connection after).
func UpstreamIdle(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("proxy: upstream idle timeout %v is not positive", d)
		}
		c.upstreamIdle = d
		return nil
	})
}

// ReplayWindow sets how long after a request the same one from the same
// client is taken for a replay of it (default 5s).
func ReplayWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("proxy: replay window %v is not positive", d)
		}
		c.window = d
		return nil
	})
}

// validToken says whether s is an HTTP token (RFC 9110), as a header's
// name must be.
func validToken(s string) bool {
	for _, r := range s {
		if r > 0x7e || r <= ' ' || stringsContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

func stringsContainsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// UpstreamPoolOptions adds options to the pool of the proxy's upstream
// connections ([Proxy.UpstreamPool]), after its own: an observer and
// connection hooks such as otelconnaudit's, which a pool takes when it is
// built.
func UpstreamPoolOptions(opts ...pool.Option) Option {
	return optionFunc(func(c *config) error { c.poolOpts = append(c.poolOpts, opts...); return nil })
}
