package probe

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/httptrace"
)

// The probe's defaults and limits.
const (
	// maxRequests is the largest number of requests one probe sends
	// ([Requests]), and the largest discovery bound ([FindMaxRequests]).
	maxRequests = 1_000_000
	// The defaults of [Requests], [Timeout], [IdleConnTimeout] (net/http's,
	// http.DefaultTransport's IdleConnTimeout) and [MaxBody].
	defaultRequests    = 20
	defaultTimeout     = 30 * time.Second
	defaultIdleTimeout = 90 * time.Second
	defaultMaxBody     = 64 << 20
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
	http1         bool // HTTP/1 only
	requireHTTP2  bool // HTTP/2 required
	findMaxReqs   int
	findIdle      bool
	maxIdle       time.Duration
	keepTimelines bool
	progress      func(Progress)
	duration      time.Duration
	requestsSet   bool // Requests was given
	// settleBound bounds the wait for a phase's connections to close
	// while the run's context lives (settleBound, the constant; tests
	// make it long, so that a wait that ignored the context's end would
	// hang).
	settleBound time.Duration
}

func defaults() config {
	return config{
		requests:    defaultRequests,
		concurrency: 1,
		conns:       1,
		timeout:     defaultTimeout,
		maxBody:     defaultMaxBody,
		clientIdle:  defaultIdleTimeout,
		settleBound: settleBound,
	}
}

// Requests sets how many requests the probe sends (default 20): at least 1
// and at most 1,000,000. Discovery requests are counted apart.
func Requests(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > maxRequests {
			return fmt.Errorf("probe: %d requests: want 1 to %d", n, maxRequests)
		}
		c.requests = n
		c.requestsSet = true
		return nil
	})
}

// Duration makes the main run send requests until d has passed since it
// began, as hey's -z does, rather than a number of them: at least one,
// however short d, and at most 1,000,000 in all, or [Requests] if given.
// Requests in flight then end as usual; the run is complete, not cut
// short. Discovery comes after it.
func Duration(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("probe: duration %v must be positive", d)
		}
		c.duration = d
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

// MaxConnsPerHost caps the connections the probe's pool opens to the host
// (http.Transport.MaxConnsPerHost; default 1). Zero means no cap.
func MaxConnsPerHost(n int) Option {
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
// A longer body did not end within the probe's bounds: its request failed
// (class "error" at the body stage, as trace -max-body fails), and the
// "request-errors" finding says so. The probe reads one byte past MaxBody
// to tell, then closes the body, which closes its HTTP/1 connection: the
// report shows a client close ("early-body-close").
func MaxBody(n int64) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("probe: max body %d is negative", n)
		}
		c.maxBody = n
		return nil
	})
}

// IdleConnTimeout is how long the probe's client keeps an idle connection
// (http.Transport.IdleConnTimeout; default 90s, net/http's default). A
// server idle timeout shorter than it is reported
// ("server-idle-shorter-than-client"): set it to your own client's value.
func IdleConnTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("probe: client idle timeout %v must be positive", d)
		}
		c.clientIdle = d
		return nil
	})
}

// TLSClientConfig sets the client's TLS configuration (cloned). The probe adds a
// session cache when it has none, so that TLS session resumption can be
// observed.
func TLSClientConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *config) error {
		if cfg == nil {
			return errors.New("probe: nil TLS config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	})
}

// Protocols sets the protocols the probe's client may speak
// (http.Protocols), one of three choices:
//
//   - HTTP/1 only: the client offers only HTTP/1.1, over TLS too, and
//     "h2-not-offered" is not checked;
//   - HTTP/2 without HTTP/1: HTTP/2 is required, and a server that does not
//     select it over TLS is an error ("h2-not-offered" at "error"); the
//     client still offers HTTP/1.1 beside it, so that such a server is
//     reported rather than refused. The target must be https;
//   - both (the default): a server without HTTP/2 is worth knowing
//     ("h2-not-offered" at "info").
//
// Unencrypted HTTP/2, or no protocol at all, is an error.
func Protocols(p http.Protocols) Option {
	return optionFunc(func(c *config) error {
		switch {
		case p.UnencryptedHTTP2():
			return fmt.Errorf("probe: Protocols %v: unencrypted HTTP/2 is not supported; want HTTP/1, HTTP/2 or both", p)
		case !p.HTTP1() && !p.HTTP2():
			return errors.New("probe: Protocols allows no protocol; want HTTP/1, HTTP/2 or both")
		}
		c.http1 = !p.HTTP2()
		c.requireHTTP2 = !p.HTTP1()
		return nil
	})
}

// FindMaxRequests enables the discovery of the server's requests-per-
// connection limit: after the main run, sequential requests on one
// connection until the server closes it, at most limit of them (2 to
// 1,000,000).
func FindMaxRequests(limit int) Option {
	return optionFunc(func(c *config) error {
		if limit < 2 || limit > maxRequests {
			return fmt.Errorf("probe: max-requests discovery bound %d: want 2 to %d", limit, maxRequests)
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
// [Result.Timelines], for a per-request waterfall. It costs memory in
// proportion to the number of requests.
func KeepTimelines() Option {
	return optionFunc(func(c *config) error {
		c.keepTimelines = true
		return nil
	})
}

// OnProgress calls f after each request and before each idle wait of
// discovery, and, with the Timeline field set, as each main-run request's
// timeline is finished: a caller can write each as it comes instead of
// keeping them ([KeepTimelines]). Calls are serialised; f must return
// quickly.
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
	// Timeline is the finished timeline of a main-run request, set only
	// on the call made for it (the other fields then say where the run
	// was); it is valid during the call only: keep a Clone.
	Timeline *httptrace.Timeline
}

// check validates the combination of options.
func (c *config) check() error {
	if c.duration > 0 && !c.requestsSet {
		c.requests = maxRequests
	}
	if c.concurrency > c.requests {
		return fmt.Errorf("probe: concurrency %d is more than the %d requests to send", c.concurrency, c.requests)
	}
	return nil
}
