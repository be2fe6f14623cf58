package pool

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
)

// Settings are a pool's caps and bounds, as its debug page shows them
// above its tables ([Snapshot.Settings]): the http.Transport's fields of
// the same names, the bound on each dial, and the tracer's options.
type Settings struct {
	// MaxConnsPerHost caps the connections to a host (0: no cap);
	// MaxIdleConns and MaxIdleConnsPerHost the idle ones kept in all and
	// per host (0: none and net/http's default of 2). DisableKeepAlives
	// closes each connection after one request.
	MaxConnsPerHost     int  `json:"max_conns_per_host"`
	MaxIdleConns        int  `json:"max_idle_conns"`
	MaxIdleConnsPerHost int  `json:"max_idle_conns_per_host"`
	DisableKeepAlives   bool `json:"disable_keep_alives"`
	// IdleConnTimeout, ResponseHeaderTimeout and TLSHandshakeTimeout are
	// the transport's (0: none).
	IdleConnTimeout       time.Duration `json:"idle_conn_timeout_ns"`
	ResponseHeaderTimeout time.Duration `json:"response_header_timeout_ns"`
	TLSHandshakeTimeout   time.Duration `json:"tls_handshake_timeout_ns"`
	// ConnectTimeout bounds each dial (0: none): a net.Dialer's Timeout,
	// or [ConnectTimeout]'s. Nil when the dial function is the caller's
	// own, whose bound the pool cannot see.
	ConnectTimeout *time.Duration `json:"connect_timeout_ns,omitempty"`
	// BodyIdleTimeout, UnclosedBodyWarning and CaptureStacks are the
	// tracer's (0 and false: off).
	BodyIdleTimeout     time.Duration `json:"body_idle_timeout_ns"`
	UnclosedBodyWarning time.Duration `json:"unclosed_body_warning_ns"`
	CaptureStacks       bool          `json:"capture_stacks"`
}

// settingsOf reads the settings of a pool over tr, whose dials dialer
// makes (nil: the caller's own dial function), traced by traced.
func settingsOf(tr *http.Transport, dialer *net.Dialer, cfg config, traced http.RoundTripper) *Settings {
	t := hook.Settings(traced)
	s := &Settings{MaxConnsPerHost: tr.MaxConnsPerHost, MaxIdleConns: tr.MaxIdleConns,
		MaxIdleConnsPerHost: tr.MaxIdleConnsPerHost, DisableKeepAlives: tr.DisableKeepAlives,
		IdleConnTimeout: tr.IdleConnTimeout, ResponseHeaderTimeout: tr.ResponseHeaderTimeout,
		TLSHandshakeTimeout: tr.TLSHandshakeTimeout,
		BodyIdleTimeout:     t.BodyIdle, UnclosedBodyWarning: t.HeldAfter, CaptureStacks: t.Stacks}
	switch {
	case cfg.connectTimeout != nil:
		d := *cfg.connectTimeout
		s.ConnectTimeout = &d
	case dialer != nil:
		d := dialer.Timeout
		s.ConnectTimeout = &d
	}
	return s
}

// text says the settings in one line, as the debug page's header.
func (s *Settings) text() string {
	if s == nil {
		return ""
	}
	bound := func(d time.Duration) string {
		if d <= 0 {
			return "none"
		}
		return d.String()
	}
	count := func(n int, zero string) string {
		if n <= 0 {
			return zero
		}
		return fmt.Sprint(n)
	}
	connect := "the caller's own dial function's"
	if s.ConnectTimeout != nil {
		connect = bound(*s.ConnectTimeout)
	}
	stacks := "off"
	if s.CaptureStacks {
		stacks = "on"
	}
	parts := []string{
		"MaxConnsPerHost " + count(s.MaxConnsPerHost, "none"),
		"MaxIdleConns " + count(s.MaxIdleConns, "no limit"),
		"MaxIdleConnsPerHost " + count(s.MaxIdleConnsPerHost, "2 (net/http's default)"),
		"IdleConnTimeout " + bound(s.IdleConnTimeout),
		"ResponseHeaderTimeout " + bound(s.ResponseHeaderTimeout),
		"TLSHandshakeTimeout " + bound(s.TLSHandshakeTimeout),
		"ConnectTimeout " + connect,
		"BodyIdleTimeout " + bound(s.BodyIdleTimeout),
		"UnclosedBodyWarning " + bound(s.UnclosedBodyWarning),
		"CaptureStacks " + stacks,
	}
	if s.DisableKeepAlives {
		parts = append(parts, "DisableKeepAlives: one request per connection")
	}
	return "pool: " + strings.Join(parts, ", ")
}
