package probe

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// Limits on what a probe may be asked to do.
const (
	// MaxRequests is the largest number of requests one probe sends
	// ([Requests]), and the largest discovery bound ([FindMaxRequests]).
	MaxRequests = 1_000_000
	// DefaultRequests is the number of requests sent without [Requests].
	DefaultRequests = 20
	// DefaultTimeout bounds one request without [Timeout].
	DefaultTimeout = 30 * time.Second
	// DefaultClientIdleTimeout is how long the probe's client keeps an
	// idle connection without [ClientIdleTimeout]: net/http's default
	// (http.DefaultTransport's IdleConnTimeout).
	DefaultClientIdleTimeout = 90 * time.Second
	// DefaultMaxBody is the number of body bytes read per response without
	// [MaxBody].
	DefaultMaxBody = 64 << 20
	// DefaultFindMaxRequests is the discovery bound the CLI uses for
	// [FindMaxRequests].
	DefaultFindMaxRequests = 1000
	// DefaultMaxIdle is the longest idle gap the CLI tries for
	// [FindIdleTimeout].
	DefaultMaxIdle = 30 * time.Second
	// maxKeptConns bounds the connections a report lists one by one.
	maxKeptConns = 4096
	// maxResponseHeaderBytes bounds a response's headers, 1xx responses
	// included (http.Transport.MaxResponseHeaderBytes), as pool.New does.
	maxResponseHeaderBytes = 1 << 20
)

// Option configures a probe. Options are applied in order; a value that
// makes no sense is an error from [Run] before any request is sent.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	requests      int
	concurrency   int
	conns         int
	gap           time.Duration
	timeout       time.Duration
	deadline      time.Duration
	maxBody       int64
	clientIdle    time.Duration
	tlsConfig     *tls.Config
	http1         bool
	requireHTTP2  bool
	findMaxReqs   int
	findIdle      bool
	maxIdle       time.Duration
	keepTimelines bool
	progress      func(Progress)
}

func defaults() config {
	return config{
		requests:    DefaultRequests,
		concurrency: 1,
		conns:       1,
		timeout:     DefaultTimeout,
		maxBody:     DefaultMaxBody,
		clientIdle:  DefaultClientIdleTimeout,
	}
}

// Requests sets how many requests the probe sends (default 20): at least 1
// and at most [MaxRequests]. Discovery requests are counted apart.
func Requests(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > MaxRequests {
			return fmt.Errorf("probe: %d requests: want 1 to %d", n, MaxRequests)
		}
		c.requests = n
		return nil
	})
}

// Concurrency sets how many requests are in flight at once (default 1). It
// must be at least 1 and at most the number of requests.
func Concurrency(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("probe: concurrency %d: want at least 1", n)
		}
		c.concurrency = n
		return nil
	})
}

// MaxConns caps the connections the probe's pool opens to the host
// (http.Transport.MaxConnsPerHost; default 1). Zero means no cap.
func MaxConns(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("probe: connection cap %d: want 0 (no cap) or more", n)
		}
		c.conns = n
		return nil
	})
}

// Gap sets the pause between the requests of one worker (default none). A
// gap longer than the server's idle timeout shows whether the server closes
// idle connections.
func Gap(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("probe: gap %v is negative", d)
		}
		c.gap = d
		return nil
	})
}

// Timeout bounds each request, body included (default 30s). It also bounds
// each dial and TLS handshake of the probe's pool, so that a dial left
// behind by a request that timed out does not outlive it by much.
func Timeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("probe: timeout %v must be positive", d)
		}
		c.timeout = d
		return nil
	})
}

// Deadline bounds the whole probe, discovery included (default: only the
// context given to [Run]). Requests not started by then are not sent, and
// the report says so.
func Deadline(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("probe: deadline %v must be positive", d)
		}
		c.deadline = d
		return nil
	})
}

// MaxBody sets how many body bytes are read per response (default 64 MiB).
// A longer body is closed early, which closes its HTTP/1 connection: the
// report shows it as a client close ("early-body-close").
func MaxBody(n int64) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("probe: max body %d is negative", n)
		}
		c.maxBody = n
		return nil
	})
}

// ClientIdleTimeout is how long the probe's client keeps an idle connection
// (http.Transport.IdleConnTimeout; default 90s, net/http's default). A
// server idle timeout shorter than it is reported
// ([FindingServerIdleShorterThanClient]): set it to your own client's value.
func ClientIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("probe: client idle timeout %v must be positive", d)
		}
		c.clientIdle = d
		return nil
	})
}

// TLSConfig sets the client's TLS configuration (cloned). The probe adds a
// session cache when it has none, so that TLS session resumption can be
// observed.
func TLSConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *config) error {
		if cfg == nil {
			return errors.New("probe: nil TLS config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	})
}

// HTTP1Only disables HTTP/2: the client offers only HTTP/1.1 over TLS, and
// [FindingH2NotOffered] is not checked.
func HTTP1Only() Option {
	return optionFunc(func(c *config) error {
		if c.requireHTTP2 {
			return errors.New("probe: HTTP1Only and RequireHTTP2 exclude each other")
		}
		c.http1 = true
		return nil
	})
}

// RequireHTTP2 makes a server that does not negotiate HTTP/2 an error
// ([FindingH2NotOffered] at [SeverityError]). The target must be https.
func RequireHTTP2() Option {
	return optionFunc(func(c *config) error {
		if c.http1 {
			return errors.New("probe: HTTP1Only and RequireHTTP2 exclude each other")
		}
		c.requireHTTP2 = true
		return nil
	})
}

// FindMaxRequests enables the discovery of the server's requests-per-
// connection limit: after the main run, sequential requests on one
// connection until the server closes it, at most limit of them (2 to
// [MaxRequests]; the CLI uses [DefaultFindMaxRequests]).
func FindMaxRequests(limit int) Option {
	return optionFunc(func(c *config) error {
		if limit < 2 || limit > MaxRequests {
			return fmt.Errorf("probe: max-requests discovery bound %d: want 2 to %d", limit, MaxRequests)
		}
		c.findMaxReqs = limit
		return nil
	})
}

// FindIdleTimeout enables the discovery of the server's keep-alive idle
// timeout: after the main run, pairs of requests on a fresh connection
// separated by growing idle gaps (100ms, 200ms, 400ms … up to max), then a
// bisection between the longest gap the connection survived and the
// shortest it did not, to within 10% or 50ms. Each trial costs two
// requests; the whole search is bounded by max, the number of trials and
// [Deadline].
func FindIdleTimeout(max time.Duration) Option {
	return optionFunc(func(c *config) error {
		if max <= 0 {
			return fmt.Errorf("probe: max idle %v must be positive", max)
		}
		c.findIdle = true
		c.maxIdle = max
		return nil
	})
}

// KeepTimelines keeps every main-run request's [httptrace.Timeline] in
// [Report.Timelines], for a per-request waterfall. It costs memory in
// proportion to the number of requests.
func KeepTimelines() Option {
	return optionFunc(func(c *config) error {
		c.keepTimelines = true
		return nil
	})
}

// OnProgress calls f after each request and before each idle wait of
// discovery. Calls are serialised; f must return quickly.
func OnProgress(f func(Progress)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("probe: nil progress function")
		}
		c.progress = f
		return nil
	})
}

// Progress is what [OnProgress] reports.
type Progress struct {
	// Phase is "requests", "find-max-requests" or "find-idle-timeout".
	Phase string
	// Done and Total count the requests of the phase (Total is 0 when the
	// phase has no fixed count).
	Done, Total int
	// Dials counts the dials of the main run so far.
	Dials int64
	// Idle is the idle gap discovery is waiting out, 0 otherwise.
	Idle time.Duration
	// Elapsed is the time since the probe started.
	Elapsed time.Duration
}

// check validates the combination of options.
func (c *config) check() error {
	if c.concurrency > c.requests {
		return fmt.Errorf("probe: concurrency %d is more than the %d requests to send", c.concurrency, c.requests)
	}
	return nil
}
