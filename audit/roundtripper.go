//lint:file-ignore SA1019 x/net's http2.Transport is deprecated, not gone: clients still use it, and it is audited as it is.

package audit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/pool"
	"golang.org/x/net/http2"
)

// WithRoundTripper audits the http.RoundTripper that newRT returns (called
// once per scenario, and once more by [Runner.Run] to read it) instead of
// the reference pool: an *http.Transport, as [WithTransport] audits it; an
// x/net http2.Transport; or a chain of the caller's (a wrapper adding
// headers, OpenTelemetry's otelhttp.Transport), through which every
// request of the scenario is sent. name labels the report, and poolOpts
// are applied as WithTransport applies them.
//
// The runner looks inside a RoundTripper that is neither for the transport
// it sends requests through, by a method
//
//	Unwrap() http.RoundTripper
//
// on each layer of the chain, as far as one has it (otelhttp's Transport
// has none). What it finds decides what it sees, and each result says
// which in a note ("sees: …"):
//
//   - An *http.Transport inside a chain is tracked in place, as
//     WithTransport tracks a clone (the factory's transport must be fresh,
//     never shared): its connections, its bounds, one connection per host.
//   - An x/net http2.Transport, itself or inside, speaks HTTP/2 only: its
//     connections are tracked through its DialTLSContext, which the runner
//     wraps (it dials with no timeout when that is nil), and its bounds are
//     its own: no header wait, ReadIdleTimeout and PingTimeout as the
//     health check, waited for as a bound. Its TLSClientConfig needs no
//     CA: the runner's dial uses a copy of it (nil: a fresh one) that
//     trusts the fault server and names it, the rest as given. Declare
//     [Protocols] with HTTP2 only to have no HTTP/1 scenario reported as
//     skipped: var p http.Protocols; p.SetHTTP2(true); audit.Protocols(p).
//     x/net's dial has no bound, and HTTP/2 has no scenario of a dial that
//     hangs: that is said here, not judged.
//   - In any other RoundTripper the runner sees nothing: a stage it
//     does not end is waited for up to the guard deadline ([GuardDeadline])
//     and half again, so that a bound of its own is given the time to act;
//     the dials and the connection's fate are not checked (said, not
//     passed or failed); the scenarios that need the pool capped at one
//     connection, or the fault server's certificate trusted (HTTPS, so
//     every HTTP/2 scenario), are skipped, with the fix: an Unwrap method.
func WithRoundTripper(name string, newRT func() http.RoundTripper, poolOpts ...pool.Option) Option {
	return optionFunc(func(r *Runner) error {
		if newRT == nil {
			return errors.New("audit: nil RoundTripper factory")
		}
		r.transport, r.roundTripper, r.transportName, r.poolOpts = nil, newRT, name, poolOpts
		return nil
	})
}

// What the runner sees of a RoundTripper under audit that is not an
// *http.Transport itself ([subject.kind]).
const (
	kindWrapped = "wrapped" // an *http.Transport inside a chain
	kindHTTP2   = "http2"   // an x/net http2.Transport, itself or inside
	kindOpaque  = "opaque"  // nothing inside
)

// maxUnwrap bounds the layers looked through.
const maxUnwrap = 32

// chain is a RoundTripper of the caller's that is not an *http.Transport,
// and what the runner found inside it.
type chain struct {
	top http.RoundTripper
	t1  *http.Transport  // the transport inside, if found
	t2  *http2.Transport // or x/net's HTTP/2 transport, if found
	// layers names the chain's types, outermost first, as far as it was
	// followed.
	layers []string
}

// unwrap follows rt's Unwrap methods to the transport inside it.
func unwrap(rt http.RoundTripper) *chain {
	c := &chain{top: rt}
	for range maxUnwrap {
		c.layers = append(c.layers, fmt.Sprintf("%T", rt))
		switch t := rt.(type) {
		case *http.Transport:
			c.t1 = t
			return c
		case *http2.Transport:
			c.t2 = t
			return c
		}
		u, ok := rt.(interface{ Unwrap() http.RoundTripper })
		if !ok {
			return c
		}
		if rt = u.Unwrap(); rt == nil {
			return c
		}
	}
	return c
}

// closeIdle closes the idle connections of rt, if it has such a method.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// client returns the client under audit, from the factory given: an
// *http.Transport, or a chain; both nil for the reference pool.
func (r *Runner) client() (*http.Transport, *chain, error) {
	switch {
	case r.transport != nil:
		t := r.transport()
		if t == nil {
			return nil, nil, errors.New("audit: transport factory returned nil")
		}
		return t, nil, nil
	case r.roundTripper != nil:
		rt := r.roundTripper()
		if rt == nil {
			return nil, nil, errors.New("audit: RoundTripper factory returned nil")
		}
		if t, ok := rt.(*http.Transport); ok {
			return t, nil, nil
		}
		return nil, unwrap(rt), nil
	}
	return nil, nil, nil
}

// describe reads what the runner sees of the chain.
func (c *chain) describe(deadline time.Duration) subject {
	var s subject
	switch {
	case c.t1 != nil:
		s = describe(c.t1)
		s.kind = kindWrapped
		s.sees = fmt.Sprintf("sees: the *http.Transport inside %s (by Unwrap): its bounds and connections",
			c.path())
	case c.t2 != nil:
		s = describeHTTP2(c.t2)
		s.sees = "sees: an x/net http2.Transport: its connections, through its DialTLSContext; its bounds"
		if len(c.layers) > 1 {
			s.sees = fmt.Sprintf("sees: the x/net http2.Transport inside %s (by Unwrap): its connections, "+
				"through its DialTLSContext; its bounds", c.path())
		}
	default:
		s = subject{kind: kindOpaque, connsUnseen: true, boundsUnseen: true}
		s.sees = fmt.Sprintf("sees: no transport inside %s (no Unwrap() http.RoundTripper method): bounds unseen, "+
			"waited for up to the guard deadline (%v); connections unseen: dials and the connection's fate not checked",
			c.path(), deadline)
		s.dial = bound{name: "the RoundTripper's own"}
	}
	return s
}

// path names the chain's layers as far as they were followed.
func (c *chain) path() string {
	out := ""
	for i, l := range c.layers {
		if i > 0 {
			out += " → "
		}
		out += l
	}
	return out
}

// describeHTTP2 reads an x/net http2.Transport's protocols and bounds.
func describeHTTP2(t *http2.Transport) subject {
	s := subject{kind: kindHTTP2, idle: t.IdleConnTimeout,
		noH1:  "an x/net http2.Transport speaks HTTP/2 only",
		fixH1: "declare " + nameProtocols + " with HTTP2 only, or audit an *http.Transport"}
	//lint:ignore SA1019 DialTLS is deprecated, not gone: x/net still reads it.
	own := t.DialTLSContext != nil || t.DialTLS != nil
	if own {
		s.ownDial, s.ownTLSDial = true, true
		s.dial = bound{name: "the transport's DialTLSContext"}
	} else {
		// x/net dials with a zero tls.Dialer: neither the connect nor the
		// handshake is bounded.
		s.dial = bound{name: "net.Dialer.Timeout", known: true}
	}
	if t.ReadIdleTimeout > 0 {
		s.ping, s.pingTimeout = t.ReadIdleTimeout, t.PingTimeout
		if s.pingTimeout <= 0 {
			s.pingTimeout = defaultPingTimeout
		}
	}
	return s
}

// needsCap says why scenario s cannot be judged without the pool capped
// at one connection per host, or "".
func needsCap(s Scenario) string {
	switch s.Steps {
	case StepsSecondCaller, StepsCancelWhileWaiting, StepsLeaveBodyOpen:
		return "its steps need the pool capped at one connection per host"
	}
	return ""
}

// skipOpaque says why s is not run on an opaque RoundTripper, and the fix,
// or "".
func skipOpaque(s Scenario, srv *faultserver.Server) (skip, fix string) {
	why := needsCap(s)
	if why == "" && srv.ClientTLSConfig() != nil {
		why = "it is served over HTTPS, and the RoundTripper cannot be given the fault server's certificate"
	}
	if why == "" {
		return "", ""
	}
	return "the audit sees no transport inside the RoundTripper: " + why,
		"give each wrapper an Unwrap() http.RoundTripper method that returns the RoundTripper it wraps"
}

// newChainPool returns the pool under audit for a chain of the caller's:
// the transport inside tracked in place, or x/net's dials tracked, or
// nothing but the requests.
func (r *Runner) newChainPool(s Scenario, srv *faultserver.Server, obs httptrace.Observer, c *chain) (*pool.Pool, error) {
	opts := []pool.Option{pool.MaxConnsPerHost(1), pool.WithObserver(obs)}
	cfg := srv.ClientTLSConfig()
	switch {
	case c.t1 != nil:
		if s.Proto == HTTP2 && speaksHTTP2(c.t1) {
			opts = append(opts, pool.Protocols(protocols(true)))
		}
		if cfg != nil {
			opts = append(opts, pool.TLSClientConfig(mergeTLS(c.t1.TLSClientConfig, cfg)))
		}
	case c.t2 != nil:
		if cfg != nil {
			c.t2.TLSClientConfig = mergeTLS(c.t2.TLSClientConfig, cfg)
		}
		// The pool names a close by x/net's settings, given to it as
		// net/http's: its idle timeout and health check.
		opts = append(opts, pool.IdleConnTimeout(c.t2.IdleConnTimeout))
		if c.t2.ReadIdleTimeout > 0 {
			opts = append(opts, pool.HTTP2(http.HTTP2Config{SendPingTimeout: c.t2.ReadIdleTimeout,
				PingTimeout: c.t2.PingTimeout}))
		}
	}
	v, err := hook.TrackChain(c.top, c.t1, c.t2 != nil, append(opts, r.poolOpts...))
	if err != nil {
		return nil, err
	}
	p := v.(*pool.Pool)
	if t := c.t2; t != nil {
		own := t.DialTLSContext
		//lint:ignore SA1019 DialTLS is deprecated, not gone: x/net still reads it.
		if old := t.DialTLS; own == nil && old != nil {
			own = func(_ context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
				return old(network, addr, cfg)
			}
		}
		if own == nil {
			// x/net's own dial: a zero tls.Dialer.
			own = func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
				return (&tls.Dialer{Config: cfg}).DialContext(ctx, network, addr)
			}
		}
		t.DialTLSContext = func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
			return hook.TrackDial(p, func(ctx context.Context, network, addr string) (net.Conn, error) {
				return own(ctx, network, addr, cfg)
			})(ctx, network, addr)
		}
	}
	return p, nil
}

// mergeTLS returns the caller's TLS configuration, if any, trusting the
// fault server's certificate.
func mergeTLS(own, server *tls.Config) *tls.Config {
	if own == nil {
		return server
	}
	merged := own.Clone()
	merged.RootCAs, merged.ServerName = server.RootCAs, server.ServerName
	return merged
}

// chainStageFix says what bounds stage in a RoundTripper that is not an
// *http.Transport itself, or "" to say it as of an *http.Transport.
func (sub subject) chainStageFix(stage httptrace.Stage) string {
	switch {
	case sub.kind == kindOpaque:
		if stage == httptrace.StageBody {
			return "nothing the audit sees bounds a stalled body: pass connaudit's body-idle watchdog, " +
				nameBodyIdleTimeout + "(d), to " + nameWithRoundTripper + " after the factory (in service, " +
				"httptrace.BodyIdleTimeout to httptrace.NewTransport over it)"
		}
		return fmt.Sprintf("nothing ended stage %s within the guard deadline: bound it in the RoundTripper, "+
			"or give each wrapper an Unwrap() http.RoundTripper method so that the audit sees the transport inside", stage)
	case sub.kind != kindHTTP2:
		if stage == httptrace.StageBody && sub.kind == kindWrapped {
			return "no http.Transport field bounds a stalled body: pass connaudit's body-idle watchdog, " +
				nameBodyIdleTimeout + "(d), to " + nameWithRoundTripper + " after the factory (in service, to " +
				nameTrack + ")"
		}
		return ""
	}
	switch stage {
	case httptrace.StageDNS, httptrace.StageConnect, httptrace.StageTLS:
		if !sub.ownDial {
			return "x/net's http2.Transport dials with a tls.Dialer without a timeout: set its DialTLSContext to " +
				"one that dials with a net.Dialer's Timeout"
		}
	case httptrace.StageAwaitHeaders:
		return "x/net's http2.Transport has no bound on the wait for the response headers: give each request a " +
			"context deadline, or use an *http.Transport with ResponseHeaderTimeout and HTTP/2 (ForceAttemptHTTP2)"
	case httptrace.StageBody:
		return "x/net's http2.Transport does not bound a stalled body: pass connaudit's body-idle watchdog, " +
			nameBodyIdleTimeout + "(d), to " + nameWithRoundTripper + " after the factory (in service, " +
			"httptrace.BodyIdleTimeout to httptrace.NewTransport over it)"
	}
	return ""
}

// contractOverHTTP2 runs a retry contract, written over HTTP/1, over
// HTTP/2 when the client speaks HTTP/2 and not HTTP/1 (or HTTP/1 is not
// meant), so that an HTTP/2-only client has its retry verdicts; it says
// so, or returns "" and leaves s as it is.
func (r *Runner) contractOverHTTP2(s *Scenario, sub subject) string {
	if s.Contract == "" || s.Proto != HTTP1 || !r.isMeant(HTTP2) {
		return ""
	}
	if ok, _, _ := sub.speaks(HTTP2); !ok {
		return ""
	}
	if ok, _, _ := sub.speaks(HTTP1); ok && r.isMeant(HTTP1) {
		return ""
	}
	s.Proto = HTTP2
	s.Expect = expectOverHTTP2(s.Expect)
	return "run over HTTP/2, which the client speaks, not HTTP/1"
}

// expectOverHTTP2 returns what a retry contract written over HTTP/1
// expects over HTTP/2, as measured of net/http and x/net (TestRetryContractsOverHTTP2):
// an attempt that ends at its deadline, its header wait, its body read
// interval or its caller's cancel resets its stream, and the connection
// serves the next request, rather than closed; a server's reset is a
// stream's (RST_STREAM), which net/http does not send again, so the caller
// gets it.
func expectOverHTTP2(e Expect) Expect {
	if f := e.Fate; f != nil && f.ClosedBy == pool.ClosedByClient && f.Reason == pool.ReasonRequestError {
		e.Fate = reusedFate()
	}
	if e.Or != nil && e.Or.Class == httptrace.ClassReset {
		or := *e.Or
		or.Class = httptrace.ClassStreamReset
		e.Or = &or
	}
	return e
}
