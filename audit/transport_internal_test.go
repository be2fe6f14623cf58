package audit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// TestWhyNoHTTP2 follows net/http's rules for when a Transport attempts
// HTTP/2 over TLS, and checks them against net/http itself: the clone of
// each transport has an "h2" upgrade after its HTTP/2 set-up exactly when
// whyNoHTTP2 says it speaks HTTP/2.
func TestWhyNoHTTP2(t *testing.T) {
	dial := (&net.Dialer{}).DialContext
	dialTLS := func(context.Context, string, string) (net.Conn, error) { return nil, nil }
	var h1, both http.Protocols
	h1.SetHTTP1(true)
	both.SetHTTP1(true)
	both.SetHTTP2(true)
	for _, tc := range []struct {
		name string
		t    *http.Transport
		why  string // "" when it speaks HTTP/2
		fix  string
	}{
		{"zero", &http.Transport{}, "", ""},
		{"own dialer", &http.Transport{DialContext: dial},
			"it has its own DialContext and ForceAttemptHTTP2 is false, so net/http does not attempt HTTP/2",
			"set ForceAttemptHTTP2: true (or Protocols with HTTP2)"},
		{"own dialer and TLS config", &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{}},
			"it has its own DialContext and TLSClientConfig and ForceAttemptHTTP2 is false", "set ForceAttemptHTTP2"},
		{"own TLS dialer", &http.Transport{DialTLSContext: dialTLS}, "it has its own DialTLSContext and", "ForceAttemptHTTP2"},
		{"forced", &http.Transport{DialContext: dial, ForceAttemptHTTP2: true}, "", ""},
		{"empty TLSNextProto", &http.Transport{TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}},
			`its TLSNextProto is a non-nil map without "h2"`, "leave TLSNextProto nil"},
		{"empty TLSNextProto, forced", &http.Transport{ForceAttemptHTTP2: true,
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, `its TLSNextProto is a non-nil map`, "leave TLSNextProto nil"},
		{"Protocols without HTTP2", &http.Transport{Protocols: &h1}, "its Protocols, {HTTP1}, leaves HTTP2 out",
			"call SetHTTP2(true) on its Protocols"},
		{"Protocols with HTTP2, own dialer", &http.Transport{Protocols: &both, DialContext: dial}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, fix := whyNoHTTP2(tc.t)
			if tc.why == "" {
				require.Empty(t, why)
				require.Empty(t, fix)
			} else {
				require.Contains(t, why, tc.why)
				require.Contains(t, fix, tc.fix)
			}
			c := tc.t.Clone() // runs net/http's HTTP/2 set-up on tc.t
			defer c.CloseIdleConnections()
			require.Equal(t, why == "", tc.t.TLSNextProto["h2"] != nil, "net/http agrees")
		})
	}
}

func TestGodebug(t *testing.T) {
	t.Setenv("GODEBUG", "http2client=0, x=1,http2client=1")
	require.Equal(t, "1", godebug("http2client"), "the last one counts")
	t.Setenv("GODEBUG", "x=1,http2client=0")
	require.Equal(t, "0", godebug("http2client"))
	why, fix := whyNoHTTP2(&http.Transport{})
	require.Contains(t, why, "GODEBUG has http2client=0")
	require.Equal(t, "remove http2client=0 from GODEBUG", fix)
	t.Setenv("GODEBUG", "")
	require.Empty(t, godebug("http2client"))
}

// TestFixFor: every kind of failure names what fixes it.
func TestFixFor(t *testing.T) {
	rht := Scenario{Name: "response-header-timeout", Bound: "ResponseHeaderTimeout 150ms",
		Expect: Expect{Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders}}
	tlsStall := Scenario{Name: "tls-handshake-stall", Bound: "TLSHandshakeTimeout 150ms",
		Expect: Expect{Class: httptrace.ClassTLSHandshakeTimeout, Stage: httptrace.StageTLS}}
	connect := Scenario{Name: "connect-hang", Expect: Expect{Class: httptrace.ClassConnectTimeout, Stage: httptrace.StageConnect}}
	stall := Scenario{Name: "stall-mid-body", Expect: Expect{Class: httptrace.ClassBodyIdleTimeout, Stage: httptrace.StageBody}}
	a6 := Scenario{Name: "retry/attempt-deadline", Contract: "A6", Fix: contractFix("A6"), Bound: "attempt limit 150ms",
		Expect: Expect{Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders},
		Policy: Policy{Policy: retry.Policy{AttemptTimeout: 150 * time.Millisecond}}}
	a7 := Scenario{Name: "retry/response-header-timeout", Contract: "A7", Fix: contractFix("A7"), Bound: "ResponseHeaderTimeout 150ms < attempt limit 3s",
		Expect: Expect{Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders},
		Policy: Policy{Policy: retry.Policy{AttemptTimeout: 3 * time.Second}}}
	okReused := Scenario{Name: "ok", Bound: "-", Expect: Expect{Class: httptrace.ClassOK, Fate: &Fate{Reused: true}}}
	unbounded := func(stage vocab.Stage) Observed {
		return Observed{ClientAttempts: 1, Unbounded: true, UnboundedStage: stage, Class: httptrace.ClassDeadline, Stage: stage}
	}
	plain := describe(&http.Transport{})
	own := describe(&http.Transport{DialContext: (&net.Dialer{}).DialContext})
	for _, tc := range []struct {
		name   string
		sub    subject
		s      Scenario
		o      Observed
		m      []string
		want   []string
		beyond *bound
	}{
		{"no header bound", plain, rht, unbounded(httptrace.StageAwaitHeaders), nil,
			[]string{"set ResponseHeaderTimeout"}, nil},
		{"a header bound past the guard", describe(&http.Transport{ResponseHeaderTimeout: time.Minute}), rht,
			Observed{ClientAttempts: 1, Beyond: "ResponseHeaderTimeout (1m0s)", UnboundedStage: httptrace.StageAwaitHeaders}, nil,
			[]string{"audit.GuardDeadline(1m0s) waits for the client's 1m0s bound on stage await-headers to fire",
				"within the guard deadline (10s)"}, &bound{name: "ResponseHeaderTimeout", d: time.Minute, known: true}},
		{"a layer retrying past a header bound", describe(&http.Transport{ResponseHeaderTimeout: time.Second}), a6,
			Observed{ClientAttempts: 4, Unbounded: true, UnboundedStage: httptrace.StageAwaitHeaders, Class: httptrace.ClassDeadline, Stage: httptrace.StagePoolWait},
			[]string{lateAttempts + "2 attempts after the call's context had ended"},
			[]string{"in the retry layer: " + contractFix("A6"), "check ctx.Err() before each attempt"}, nil},
		{"a layer retrying with no header bound", plain, a6,
			Observed{ClientAttempts: 2, Unbounded: true, UnboundedStage: httptrace.StageAwaitHeaders, Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"set ResponseHeaderTimeout", "in the retry layer: " + contractFix("A6")}, nil},
		{"a layer without an attempt limit", describe(&http.Transport{ResponseHeaderTimeout: time.Second}), a6,
			Observed{ClientAttempts: 2, Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"in the retry layer: " + contractFix("A6") + ": the transport's ResponseHeaderTimeout (1s) ended the attempt that the attempt limit (150ms) should have"}, nil},
		{"a header bound below the attempt limit", describe(&http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}), a6,
			Observed{ClientAttempts: 1, Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"the transport's ResponseHeaderTimeout ended the request before the bound under audit: keep it longer than that"}, nil},
		{"a header bound tied with the attempt limit", describe(&http.Transport{ResponseHeaderTimeout: 3 * time.Second}), a7,
			Observed{ClientAttempts: 1, Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"set ResponseHeaderTimeout well apart from the attempt limit of package retry, the layer the retry " +
				"scenarios use when you give none: below it"}, nil},
		{"a header bound tied with a short attempt limit", withLayer(describe(&http.Transport{ResponseHeaderTimeout: 150 * time.Millisecond})), a6,
			Observed{ClientAttempts: 1, Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"set ResponseHeaderTimeout well apart from the retry layer's attempt limit: above it"}, nil},
		{"no TLS bound", plain, tlsStall, unbounded(httptrace.StageTLS), nil, []string{"set TLSHandshakeTimeout"}, nil},
		{"no dial bound", plain, connect, unbounded(httptrace.StageConnect), nil, []string{"net.Dialer", "Timeout"}, nil},
		{"own dialer", own, connect, unbounded(httptrace.StageConnect), nil,
			[]string{"the transport's own DialContext did not end the dial", "audit.GuardDeadline"}, nil},
		{"no body bound", plain, stall, unbounded(httptrace.StageBody), nil, []string{"pool.BodyIdleTimeout(d)"}, nil},
		{"a context's deadline first", plain, rht,
			Observed{ClientAttempts: 1, Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders}, nil,
			[]string{"ResponseHeaderTimeout must end this request before anything else does", "yours: none"}, nil},
		{"keep-alives off", plain, okReused,
			Observed{ClientAttempts: 1, Class: httptrace.ClassOK, Fate: Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonKeepAlivesOff}}, nil,
			[]string{"DisableKeepAlives"}, nil},
		{"idle timeout", describe(&http.Transport{IdleConnTimeout: time.Millisecond}), okReused,
			Observed{ClientAttempts: 1, Class: httptrace.ClassOK, Fate: Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonIdleTimeout}}, nil,
			[]string{"IdleConnTimeout (yours: 1ms)", "server's keep-alive"}, nil},
		{"idle pool full", plain, okReused,
			Observed{ClientAttempts: 1, Class: httptrace.ClassOK, Fate: Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonIdlePoolFull}}, nil,
			[]string{"MaxIdleConnsPerHost"}, nil},
		{"hidden retry", plain, okReused, Observed{ClientAttempts: 1, Class: httptrace.ClassOK, HiddenRetry: true}, nil,
			[]string{"Idempotency-Key"}, nil},
		{"not HTTP/2", own, okReused, Observed{ClientAttempts: 1, Class: httptrace.ClassOK},
			[]string{"not HTTP/2: the transport spoke HTTP/1.1 to a server that offers h2"}, []string{"ForceAttemptHTTP2"}, nil},
		{"over the cap", plain, okReused, Observed{ClientAttempts: 1, Class: httptrace.ClassOK},
			[]string{"leak after recovery: 2 connections open to 127.0.0.1:1, cap 1"}, []string{"MaxConnsPerHost"}, nil},
		{"open body", plain, okReused, Observed{ClientAttempts: 1, Class: httptrace.ClassOK},
			[]string{"leak after recovery: open body: GET /x pins connection #1"}, []string{"close every response body"}, nil},
		{"anything else", plain, okReused, Observed{ClientAttempts: 1, Class: httptrace.ClassOK},
			[]string{"the server did not observe the client's cancel"}, []string{"no transport setting explains this"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fix := tc.sub.fixFor(tc.s, tc.o, tc.m, 10*time.Second, tc.beyond)
			for _, w := range tc.want {
				require.Contains(t, fix, w)
			}
		})
	}
}

// TestTableFits: the table's rows fit the width asked, the connection's
// reason and then the outcome giving way, and wrapped lines do too.
func TestTableFits(t *testing.T) {
	tb := table{heads: []string{"SCENARIO", "OUTCOME", "CONNECTION", "RESULT"}, right: make([]bool, 4), shrink: []int{0, 2, 1, 0}}
	tb.add("a-scenario-with-a-long-name", "response-header-timeout", "close-idle-connections", "FAIL")
	tb.under(text.Wrap(strings.Repeat("word ", 30)+strings.Repeat("x", 130), "  - ", "    ", 40)...)
	var b strings.Builder
	tb.write(&b, 75)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, l := range lines {
		require.LessOrEqual(t, len([]rune(l)), 75, "%q", l)
	}
	require.Equal(t, "a-scenario-with-a-long-name  response-header-timeout  close-idle-c…  FAIL", lines[1],
		"the connection column gave way")
	b.Reset()
	tb.write(&b, 60)
	require.Equal(t, "a-scenario-with-a-long-name  response-h…  close-idl…  FAIL", strings.Split(b.String(), "\n")[1],
		"then the outcome, down to their headings")
	for _, l := range lines[2:] {
		require.LessOrEqual(t, len([]rune(l)), 40, "%q", l)
		require.True(t, strings.HasPrefix(l, "  - ") || strings.HasPrefix(l, "    "), "%q", l)
	}
}

// TestTie: a header bound within a tenth of the attempt limit is too close
// to call, either side; one further off is not; the reference pool, a
// scenario that is no contract, and one of another stage never tie.
func TestTie(t *testing.T) {
	a7 := Scenario{Name: "retry/response-header-timeout", Contract: "A7", Fix: contractFix("A7"),
		Expect: Expect{Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders},
		Policy: Policy{Policy: retry.Policy{AttemptTimeout: 3 * time.Second}}}
	rht := func(d time.Duration) subject { return describe(&http.Transport{ResponseHeaderTimeout: d}) }
	for d, tie := range map[time.Duration]bool{
		2699 * time.Millisecond: false, 2700 * time.Millisecond: true, 3 * time.Second: true,
		3300 * time.Millisecond: true, 3301 * time.Millisecond: false, 0: false,
	} {
		got := rht(d).tie(a7)
		require.Equal(t, tie, got != "", "%v: %q", d, got)
	}
	require.Equal(t, "A7: too close to tell apart: ResponseHeaderTimeout (3s) and the attempt limit (3s): either may end "+
		"the attempt first, so which did is no verdict", rht(3*time.Second).tie(a7))
	require.Empty(t, subject{reference: true, rht: 3 * time.Second}.tie(a7))
	other := a7
	other.Contract = ""
	require.Empty(t, rht(3*time.Second).tie(other))
	other = a7
	other.Expect.Stage = httptrace.StageBody
	require.Empty(t, rht(3*time.Second).tie(other))
}

// A connection expected reused that net/http gave up after a request that
// succeeded (its 50ms wait for the write goroutine, under load) is not the
// fault's doing: no fate mismatch. Any other fate still is one.
func TestGivenUpUnderLoad(t *testing.T) {
	e := Expect{Class: httptrace.ClassOK, ClientAttempts: 1, ServerRequests: 1, Fate: &Fate{Reused: true}}
	o := Observed{Class: httptrace.ClassOK, ClientAttempts: 1, ServerRequests: 1, Recovered: true,
		Fate: Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonClient}}
	require.Empty(t, compare(e, o))
	for _, other := range []Fate{
		{ClosedBy: pool.ClosedByServer, Reason: pool.ReasonServerEOF},
		{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonKeepAlivesOff},
		{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonEarlyBodyClose},
	} {
		o.Fate = other
		require.Len(t, compare(e, o), 1, "%s", other)
	}
	o.Fate, o.Class = Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonClient}, httptrace.ClassReset
	require.Len(t, compare(e, o), 2, "an outcome that failed is the fault's")
}

// TestFixForTheLayerAlone: under a retry layer of the user's over the
// reference pool, an attempt left unbounded is the layer's to bound, not a
// transport setting of a pool the user does not own; a POST a layer at its
// defaults did not replay is its safe default, not a rule it broke.
func TestFixForTheLayerAlone(t *testing.T) {
	a6 := Scenario{Name: "retry/attempt-deadline", Contract: "A6", Fix: contractFix("A6"), Subject: "the attempt timeout",
		Expect: Expect{Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders, ClientAttempts: 1},
		Policy: Policy{Policy: retry.Policy{AttemptTimeout: 150 * time.Millisecond}}}
	o := Observed{ClientAttempts: 1, Unbounded: true, UnboundedStage: httptrace.StageAwaitHeaders,
		Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders}
	fix := subject{reference: true}.fixFor(a6, o, nil, 10*time.Second, nil)
	require.Contains(t, fix, contractFix("A6"))
	require.NotContains(t, fix, "ResponseHeaderTimeout")
	require.Contains(t, describe(&http.Transport{}).fixFor(a6, o, nil, 10*time.Second, nil), "set ResponseHeaderTimeout",
		"the user's own transport is told what bounds its header wait")

	w1 := Scenario{Name: "retry/post-unsafe", Contract: "W1", Fix: contractFix("W1"), Subject: "the POST",
		Expect: Expect{Class: httptrace.ClassOK, Status: 200, ClientAttempts: 2}, Policy: Policy{Policy: retry.Policy{MaxRetries: 1}}}
	once := Observed{ClientAttempts: 1, Class: httptrace.ClassOK, Status: 503}
	fix = subject{reference: true, retryDefaults: true}.fixFor(w1, once, []string{"client attempts: expected 2, observed 1"}, 10*time.Second, nil)
	require.Contains(t, fix, "the safe default")
	fix = subject{reference: true}.fixFor(w1, once, []string{"client attempts: expected 2, observed 1"}, 10*time.Second, nil)
	require.Equal(t, "in the retry layer: "+fixReplayPOST, fix)
}

// TestFitAttemptLimit: a contract whose attempt the transport's own read
// bound must end gets an attempt limit above that bound when the
// catalogue's is not well above it; a short bound, no bound, the reference
// pool and the other contracts keep the catalogue's numbers.
func TestFitAttemptLimit(t *testing.T) {
	base := retry.Policy{AttemptTimeout: 3 * time.Second, TotalTimeout: 8 * time.Second, MaxRetries: 2}
	a7 := Scenario{Name: "retry/response-header-timeout", Contract: "A7", Fix: contractFix("A7"),
		Expect: Expect{Class: httptrace.ClassResponseHeaderTimeout, Stage: httptrace.StageAwaitHeaders}, Policy: Policy{Policy: base}}
	a10 := Scenario{Name: "retry/body-read-interval", Contract: "A10", Fix: contractFix("A10"),
		Expect: Expect{Class: httptrace.ClassBodyIdleTimeout, Stage: httptrace.StageBody}, Policy: Policy{Policy: base}}
	a6 := Scenario{Name: "retry/attempt-deadline", Contract: "A6", Fix: contractFix("A6"),
		Expect: Expect{Class: httptrace.ClassDeadline, Stage: httptrace.StageAwaitHeaders}, Policy: Policy{Policy: base}}

	s := a7
	note := describe(&http.Transport{ResponseHeaderTimeout: 5 * time.Second}).fitAttemptLimit(&s)
	require.Equal(t, 7500*time.Millisecond, s.Policy.AttemptTimeout)
	require.Equal(t, 12500*time.Millisecond, s.Policy.TotalTimeout)
	require.Equal(t, "attempt limit 7.5s, not the catalogue's 3s: above the transport's ResponseHeaderTimeout (5s), "+
		"which the contract orders below it", note)

	s = a7
	require.NotEmpty(t, describe(&http.Transport{ResponseHeaderTimeout: 2800 * time.Millisecond}).fitAttemptLimit(&s),
		"a bound within a tenth of the limit is raised above, not raced")
	require.Equal(t, 4200*time.Millisecond, s.Policy.AttemptTimeout)

	sub := describe(&http.Transport{})
	sub.bodyIdle = 4 * time.Second
	s = a10
	require.NotEmpty(t, sub.fitAttemptLimit(&s))
	require.Equal(t, 6*time.Second, s.Policy.AttemptTimeout)

	for _, tc := range []struct {
		name string
		sub  subject
		s    Scenario
	}{
		{"short bound", describe(&http.Transport{ResponseHeaderTimeout: 2 * time.Second}), a7},
		{"no bound", describe(&http.Transport{}), a7},
		{"reference pool", subject{reference: true, rht: 5 * time.Second}, a7},
		{"another contract", describe(&http.Transport{ResponseHeaderTimeout: 5 * time.Second}), a6},
	} {
		s := tc.s
		require.Empty(t, tc.sub.fitAttemptLimit(&s), tc.name)
		require.Equal(t, base, s.Policy.Policy, tc.name)
	}
}

// contractFix is the fix the catalogue gives the contract id.
func contractFix(id string) string {
	for _, s := range Catalogue() {
		if s.Contract == id {
			return s.Fix
		}
	}
	panic("no contract " + id)
}

// withLayer returns s audited with a retry layer of the caller's.
func withLayer(s subject) subject {
	s.ownLayer = true
	return s
}
