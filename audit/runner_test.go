package audit_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/xml"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
	"github.com/stretchr/testify/require"
)

func scenario(t *testing.T, name string) audit.Scenario {
	t.Helper()
	for _, s := range audit.Catalogue() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return audit.Scenario{}
}

func TestCatalogueNamesAreUniqueAndComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range audit.Catalogue() {
		require.False(t, seen[s.Name], "duplicate %s", s.Name)
		seen[s.Name] = true
		require.NotEmpty(t, s.Fault, s.Name)
		require.NotEmpty(t, s.Expect.Class, s.Name)
		require.Positive(t, s.Expect.ClientAttempts, s.Name)
	}
	for _, name := range []string{"ok", "status-503", "status-500", "status-404", "response-header-timeout",
		"attempt-deadline", "cancel-in-handler", "cancel-waiting-for-conn", "close-before-response", "hidden-retry",
		"reset", "close-mid-body", "stall-mid-body", "trickle-body", "early-body-close", "unclosed-body",
		"connection-close", "tls-handshake-stall", "connect-hang", "connect-refused", "h2/status-503", "h2/status-500",
		"h2/status-404", "h2/close-mid-body", "h2/stall-mid-body", "h2/trickle-body", "h2/early-body-close", "h2/goaway",
		"h2/reset", "retry/503-503-ok", "retry/post-idempotency-key"} {
		require.True(t, seen[name], "the catalogue has %s", name)
	}
}

func TestSelect(t *testing.T) {
	all := audit.Catalogue()
	got, err := audit.Select(all, "^h2/", "")
	require.NoError(t, err)
	require.NotEmpty(t, got)
	for _, s := range got {
		require.True(t, strings.HasPrefix(s.Name, "h2/"))
	}
	got, err = audit.Select(all, "", "")
	require.NoError(t, err)
	require.Len(t, got, len(all))

	// Excluded by name: what -run keeps, -skip leaves out.
	got, err = audit.Select(all, "^reset$", "^h2/")
	require.NoError(t, err)
	require.Equal(t, []string{"reset"}, audit.Names(got))

	// By protocol: over HTTP/2 only, or over HTTP/1 only.
	h2, err := audit.Select(all, "", "", audit.HTTP2)
	require.NoError(t, err)
	h1, err := audit.Select(all, "", "", audit.HTTP1)
	require.NoError(t, err)
	require.Len(t, append(h1, h2...), len(all))
	for _, s := range h2 {
		require.Equal(t, audit.HTTP2, s.Proto, s.Name)
	}
	for _, s := range h1 {
		require.Equal(t, audit.HTTP1, s.Proto, s.Name)
	}
	got, err = audit.Select(all, "trickle", "", audit.HTTP1, audit.HTTP2)
	require.NoError(t, err)
	require.Equal(t, []string{"trickle-body", "h2/trickle-body"}, audit.Names(got))

	_, err = audit.Select(all, "(", "")
	require.ErrorContains(t, err, "bad run pattern")
	_, err = audit.Select(all, "", "[")
	require.ErrorContains(t, err, "bad skip pattern")
	_, err = audit.Select(all, "", "", "h3")
	require.ErrorContains(t, err, `unknown protocol "h3"`)
	_, err = audit.Select(all, "no-such-scenario", "")
	require.ErrorContains(t, err, `no scenario is selected by run "no-such-scenario"`)
	_, err = audit.Select(all, "", ".")
	require.ErrorContains(t, err, `no scenario is selected by skip "."`)
	_, err = audit.Select(all, "^h2/", "", audit.HTTP1)
	require.ErrorContains(t, err, `no scenario is selected by run "^h2/", protocols [http1]`)
}

func TestNewRunnerRejectsNonsense(t *testing.T) {
	_, err := audit.NewRunner(audit.GuardDeadline(0))
	require.Error(t, err)
	_, err = audit.NewRunner(audit.WithTransport("x", nil))
	require.Error(t, err)
	_, err = audit.NewRunner(nil)
	require.Error(t, err)
	_, err = audit.NewRunner(audit.Protocols(http.Protocols{}))
	require.ErrorContains(t, err, "neither HTTP1 nor HTTP2")
}

// A transport without ResponseHeaderTimeout is audited: the runner reports
// the stage as unbounded instead of hanging, and the pool still recovers.
func TestUnboundedTransportIsReported(t *testing.T) {
	r, err := audit.NewRunner(
		audit.WithTransport("no timeouts", func() *http.Transport { return &http.Transport{} }))
	require.NoError(t, err)
	for _, tc := range []struct{ name, stage, fix string }{
		{"response-header-timeout", "await-headers", "set ResponseHeaderTimeout"},
		{"stall-mid-body", "body", "pool.BodyIdleTimeout(d)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.RunOne(context.Background(), scenario(t, tc.name))
			require.False(t, res.Pass)
			require.True(t, res.Observed.Unbounded)
			require.Contains(t, res.Mismatches,
				"unbounded: no timeout fired at stage "+tc.stage+" within the scenario's guard (2s, three times its "+
					"wait and a second, at least 2s; the guard deadline, 10s, waits only for a bound the audit cannot see)")
			require.Contains(t, res.Fix, tc.fix)
			require.True(t, res.Observed.Recovered, "the pool recovers after the guard ended the request")
			require.Empty(t, res.Observed.Leaks)
		})
	}
}

// The same transport with the bounds set passes: the header bound on the
// transport, the body-idle bound on the pool that wraps it.
func TestBoundedTransportPasses(t *testing.T) {
	r, err := audit.NewRunner(audit.WithTransport("bounded", func() *http.Transport {
		return &http.Transport{ResponseHeaderTimeout: 150 * time.Millisecond}
	}, pool.BodyIdleTimeout(150*time.Millisecond)))
	require.NoError(t, err)
	for _, name := range []string{"response-header-timeout", "stall-mid-body"} {
		res := r.RunOne(context.Background(), scenario(t, name))
		require.True(t, res.Pass, "%s: %v", name, res.Mismatches)
	}
}

// The Transport's hidden retry is detected: the server saw 2 requests, the
// caller made 1 attempt.
func TestHiddenRetryIsDetected(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	s := scenario(t, "hidden-retry")
	res := r.RunOne(context.Background(), s)
	require.True(t, res.Pass, "%v", res.Mismatches)
	require.True(t, res.Observed.HiddenRetry)
	require.EqualValues(t, 2, res.Observed.ServerRequests)
	require.Equal(t, 1, res.Observed.ClientAttempts)
	require.Equal(t, 2, res.Observed.GetConns, "the Transport asked for a connection twice")
	require.Equal(t, 1, res.Observed.TransportRetries, "and sent the request again on a second one")

	// Expecting no retry, the same run reports it as a mismatch.
	s.Expect.HiddenRetry = false
	s.Expect.ServerRequests = 1
	res = r.RunOne(context.Background(), s)
	require.False(t, res.Pass)
	require.Contains(t, res.Mismatches, "hidden transport retry: the server saw 2 requests for 1 client attempts")
}

func TestReports(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	ok := scenario(t, "ok")
	bad := scenario(t, "status-404")
	bad.Expect.Status = 200 // a deliberate mismatch
	rep := r.Run(context.Background(), []audit.Scenario{ok, bad})
	require.Equal(t, 1, rep.Passed)
	require.Equal(t, 1, rep.Failed)
	require.False(t, rep.OK())

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.Contains(t, text.String(), "SCENARIO")
	require.Contains(t, text.String(), "status: expected 200, observed 404")
	require.Contains(t, text.String(), "1 passed, 1 failed")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var decoded struct {
		Results []struct {
			Name     string         `json:"name"`
			Pass     bool           `json:"pass"`
			Expected map[string]any `json:"expected"`
			Observed map[string]any `json:"observed"`
		} `json:"results"`
		Passed int `json:"passed"`
		Failed int `json:"failed"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded))
	require.Equal(t, 1, decoded.Passed)
	require.Equal(t, 1, decoded.Failed)
	require.Equal(t, "ok", decoded.Results[0].Name)
	require.True(t, decoded.Results[0].Pass)
	require.Equal(t, "ok", decoded.Results[0].Observed["class"])
	require.NotNil(t, decoded.Results[1].Expected["status"])

	suites := junitOf(t, rep)
	require.Len(t, suites.Suites, 1)
	require.Equal(t, 2, suites.Suites[0].Tests)
	require.Equal(t, 1, suites.Suites[0].Failures)
	require.Nil(t, suites.Suites[0].Cases[0].Failure)
	require.NotNil(t, suites.Suites[0].Cases[1].Failure)
	require.Contains(t, suites.Suites[0].Cases[1].Failure.Message, "status: expected 200")
}

// junitReport is what the tests read of a JUnit report.
type junitReport struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// junitOf writes rep as JUnit XML and reads it back.
func junitOf(t *testing.T, rep audit.Report) junitReport {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, rep.WriteJUnit(&b))
	var r junitReport
	require.NoError(t, xml.Unmarshal(b.Bytes(), &r))
	return r
}

// TestRunReportsScenariosNotStarted runs scenarios one at a time and ends
// the run's context from the first scenario's result callback, so the
// others are never started, whatever the timing: the report still lists every scenario given, the ones not
// run as skipped, in the text, JSON and JUnit forms, and is not OK.
func TestRunReportsScenariosNotStarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := audit.NewRunner(audit.Parallel(1), audit.OnResult(func(audit.Result) { cancel() }))
	require.NoError(t, err)
	rep := r.Run(ctx, []audit.Scenario{scenario(t, "ok"), scenario(t, "status-404"), scenario(t, "h2/ok")})
	require.Len(t, rep.Results, 3)
	require.Equal(t, 1, rep.Passed)
	require.Zero(t, rep.Failed)
	require.Equal(t, 2, rep.Skipped)
	require.False(t, rep.OK(), "a run that skipped scenarios is not OK")
	require.True(t, rep.Results[0].Pass)
	require.Empty(t, rep.Results[0].Skipped)
	for _, res := range rep.Results[1:] {
		require.False(t, res.Pass, res.Name)
		require.Equal(t, "not started: context canceled", res.Skipped, res.Name)
		require.Empty(t, res.Mismatches, res.Name)
		require.Zero(t, res.Elapsed, res.Name)
	}

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, true))
	lines := strings.Split(text.String(), "\n")
	row := func(name string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				return f
			}
		}
		t.Fatalf("no row for %s in\n%s", name, text.String())
		return nil
	}
	require.Equal(t, []string{"status-404", "not", "run", "-", "-", "-", "SKIP"}, row("status-404"))
	require.Equal(t, "SKIP", row("h2/ok")[len(row("h2/ok"))-1])
	require.Equal(t, "PASS", row("ok")[len(row("ok"))-1])
	require.NotContains(t, text.String(), "status-404 (", "no detail section for a scenario not run")
	require.Contains(t, text.String(), "1 passed, 0 failed, 2 skipped in ")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var decoded struct {
		Results []map[string]any `json:"results"`
		Passed  *int             `json:"passed"`
		Failed  *int             `json:"failed"`
		Skipped *int             `json:"skipped"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded))
	require.Equal(t, 1, *decoded.Passed)
	require.Equal(t, 0, *decoded.Failed)
	require.Equal(t, 2, *decoded.Skipped)
	require.Len(t, decoded.Results, 3)
	require.NotContains(t, decoded.Results[0], "skipped", "a scenario that ran has no skipped field")
	for i, name := range []string{"status-404", "h2/ok"} {
		res := decoded.Results[i+1]
		require.Equal(t, name, res["name"])
		require.Equal(t, false, res["pass"])
		require.Equal(t, "not started: context canceled", res["skipped"])
	}

	suites := junitOf(t, rep)
	require.Len(t, suites.Suites, 1)
	s := suites.Suites[0]
	require.Equal(t, 3, s.Tests)
	require.Zero(t, s.Failures)
	require.Equal(t, 2, s.Skipped)
	require.Len(t, s.Cases, 3)
	require.Nil(t, s.Cases[0].Skipped)
	for i, name := range []string{"status-404", "h2/ok"} {
		c := s.Cases[i+1]
		require.Equal(t, name, c.Name)
		require.Nil(t, c.Failure)
		require.NotNil(t, c.Skipped, name)
		require.Equal(t, "not started: context canceled", c.Skipped.Message)
	}
}

// A transport audited as it is shipped speaks HTTP/2 in the h2 scenarios
// when it would in service (a plain http.Transport does, though the
// audit's TLS configuration would turn net/http's automatic HTTP/2 off).
// One that turned HTTP/2 off has its h2 scenarios skipped, with the reason
// and the fix, rather than passed over HTTP/1 or failed one by one.
func TestUserTransportInHTTP2Scenarios(t *testing.T) {
	plain, err := audit.NewRunner(audit.WithTransport("plain", func() *http.Transport { return &http.Transport{} }))
	require.NoError(t, err)
	res := plain.RunOne(context.Background(), scenario(t, "h2/ok"))
	require.True(t, res.Pass, "%v", res.Mismatches)
	require.Equal(t, "HTTP/2.0", res.Observed.Timeline.Proto)

	h1, err := audit.NewRunner(audit.WithTransport("http/1 only", func() *http.Transport {
		return &http.Transport{TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	}))
	require.NoError(t, err)
	res = h1.RunOne(context.Background(), scenario(t, "h2/ok"))
	require.False(t, res.Pass)
	require.Empty(t, res.Mismatches)
	require.Equal(t, `the transport does not speak HTTP/2: its TLSNextProto is a non-nil map without "h2", which turns HTTP/2 off`,
		res.Skipped)
	require.Contains(t, res.Fix, "leave TLSNextProto nil")
}

// shapes of transport whose protocols the tests declare.
func customDialer(force bool) func() *http.Transport {
	return func() *http.Transport {
		d := &net.Dialer{Timeout: 500 * time.Millisecond}
		return &http.Transport{DialContext: d.DialContext, ForceAttemptHTTP2: force,
			ResponseHeaderTimeout: 500 * time.Millisecond, TLSHandshakeTimeout: 500 * time.Millisecond}
	}
}

func httpProtocols(h1, h2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(h1)
	p.SetHTTP2(h2)
	return p
}

// TestProtocolsMeant: the scenarios of a protocol not meant are skipped,
// not failed; a protocol meant that the transport cannot speak is one
// finding that names why and the fix, and its scenarios are skipped.
func TestProtocolsMeant(t *testing.T) {
	sel, err := audit.Select(audit.Catalogue(), "^(h2/)?(ok|status-404)$", "")
	require.NoError(t, err)

	// An HTTP/1-only transport declared as such passes, its h2 rows
	// skipped as not meant.
	r, err := audit.NewRunner(audit.WithTransport("h1", customDialer(false)), audit.Protocols(httpProtocols(true, false)))
	require.NoError(t, err)
	rep := r.Run(context.Background(), sel)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, 2, rep.Passed)
	require.Equal(t, 2, rep.Skipped)
	require.Empty(t, rep.Findings)
	require.Equal(t, "HTTP/1 only", rep.Protocols)
	for _, res := range rep.Results[2:] {
		require.Equal(t, "HTTP/2 is not meant (audit.Protocols: HTTP/1 only)", res.Skipped, res.Name)
	}

	// The same transport with HTTP/2 meant: one finding, naming
	// ForceAttemptHTTP2, and the h2 rows skipped with the reason.
	r, err = audit.NewRunner(audit.WithTransport("h1", customDialer(false)), audit.Protocols(httpProtocols(true, true)))
	require.NoError(t, err)
	rep = r.Run(context.Background(), sel)
	require.False(t, rep.OK())
	require.Equal(t, 2, rep.Passed)
	require.Zero(t, rep.Failed)
	require.Equal(t, 2, rep.Skipped)
	require.Equal(t, []string{"HTTP/2 is meant, but the transport cannot speak it: it has its own DialContext and " +
		"ForceAttemptHTTP2 is false, so net/http does not attempt HTTP/2; fix: set ForceAttemptHTTP2: true " +
		"(or Protocols with HTTP2)"}, rep.Findings)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.Contains(t, text.String(), "FINDING: HTTP/2 is meant, but the transport cannot speak it")
	require.Contains(t, text.String(), "  fix: set ForceAttemptHTTP2: true")
	require.Contains(t, text.String(), "2 passed, 0 failed, 2 skipped, 1 finding in ")
	suites := junitOf(t, rep)
	require.Equal(t, 1, suites.Suites[0].Failures, "the finding fails a case of its own")
	require.Equal(t, "findings", suites.Suites[0].Cases[4].Name)
	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var decoded struct {
		Findings  []string `json:"findings"`
		Protocols string   `json:"protocols"`
		Results   []struct {
			Skipped string `json:"skipped"`
			Fix     string `json:"fix"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded))
	require.Equal(t, rep.Findings, decoded.Findings)
	require.Equal(t, "HTTP/1 and HTTP/2", decoded.Protocols)
	require.Contains(t, decoded.Results[3].Skipped, "the transport cannot speak HTTP/2, which is meant")
	require.Contains(t, decoded.Results[3].Fix, "ForceAttemptHTTP2")

	// ForceAttemptHTTP2 with the same dialer speaks HTTP/2: no finding.
	r, err = audit.NewRunner(audit.WithTransport("h2", customDialer(true)), audit.Protocols(httpProtocols(true, true)))
	require.NoError(t, err)
	rep = r.Run(context.Background(), sel)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, 4, rep.Passed)

	// HTTP/2 only: the HTTP/1 rows are not meant.
	r, err = audit.NewRunner(audit.WithTransport("h2", customDialer(true)), audit.Protocols(httpProtocols(false, true)))
	require.NoError(t, err)
	rep = r.Run(context.Background(), sel)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, []string{"HTTP/1 is not meant (audit.Protocols: HTTP/2 only)", "HTTP/1 is not meant (audit.Protocols: HTTP/2 only)", "", ""},
		[]string{rep.Results[0].Skipped, rep.Results[1].Skipped, rep.Results[2].Skipped, rep.Results[3].Skipped})

	// A transport whose Protocols leave HTTP/1 out, with HTTP/1 meant.
	r, err = audit.NewRunner(audit.WithTransport("no h1", func() *http.Transport {
		p := httpProtocols(false, true)
		return &http.Transport{Protocols: &p}
	}), audit.Protocols(httpProtocols(true, true)))
	require.NoError(t, err)
	rep = r.Run(context.Background(), sel)
	require.False(t, rep.OK())
	require.Equal(t, []string{"HTTP/1 is meant, but the transport cannot speak it: its Protocols, {HTTP2}, leaves HTTP1 " +
		"out; fix: call SetHTTP1(true) on its Protocols"}, rep.Findings)
	require.Equal(t, 2, rep.Passed, "the h2 rows pass")
}

// The runner's checks fail a scenario whose expectation is not met: each
// case runs a real scenario with one expectation made wrong.
func TestRunnerChecksCanFail(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, scenario, mismatch string
		edit                     func(*audit.Expect)
	}{
		{"fate", "ok", "connection fate: expected closed by server (server-eof), observed reused",
			func(e *audit.Expect) {
				e.Fate = &audit.Fate{ClosedBy: pool.ClosedByServer, Reason: pool.ReasonServerEOF}
			}},
		{"no connection", "connect-refused", "connection fate: expected reused, observed -",
			func(e *audit.Expect) { e.Fate = &audit.Fate{Reused: true} }},
		{"dials", "ok", "dials: expected 2, observed 1", func(e *audit.Expect) { two := int64(2); e.Dials = &two }},
		{"cancel expected", "ok", "the server did not observe the client's cancel", func(e *audit.Expect) { e.CancelObserved = true }},
		{"leak not there", "ok", "the leak was not detected: no open body named", func(e *audit.Expect) { e.Leak = true }},
		{"body too fast", "ok", "body: expected to take at least 1h0m0s", func(e *audit.Expect) { e.BodyAtLeast = time.Hour }},
		{"body bytes", "close-mid-body", "body bytes: expected 1001, observed 1000",
			func(e *audit.Expect) { sent := int64(1001); e.BodyBytes = &sent }},
		{"h2 body bytes", "h2/close-mid-body", "body bytes: expected 999, observed 1000",
			func(e *audit.Expect) { sent := int64(999); e.BodyBytes = &sent }},
		{"handler entries", "cancel-in-handler", "handler entries: expected 2, observed 1",
			func(e *audit.Expect) { two := int64(2); e.HandlersEntered = &two }},
		{"connections accepted", "tls-handshake-stall", "connections the server accepted: expected 2, observed 1",
			func(e *audit.Expect) { two := int64(2); e.ConnsAccepted = &two }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scenario(t, tc.scenario)
			tc.edit(&s.Expect)
			res := r.RunOne(context.Background(), s)
			require.False(t, res.Pass)
			found := false
			for _, m := range res.Mismatches {
				if strings.HasPrefix(m, tc.mismatch) {
					found = true
				}
			}
			require.True(t, found, "want %q among %q", tc.mismatch, res.Mismatches)
		})
	}
}

// TestWriteTextEscapesControlCharacters: the texts a report shows may quote
// a server or a user's transport; none of their control characters reaches
// the terminal.
func TestWriteTextEscapesControlCharacters(t *testing.T) {
	const hostile = "\x1b[2J\x1b]0;title\x07\rPASS"
	rep := audit.Report{
		Results: []audit.Result{{
			Name: "custom" + hostile, Fault: "fault" + hostile, Bound: "bound" + hostile,
			Mismatches: []string{"mismatch" + hostile, "two\nlines" + hostile},
			Observed:   audit.Observed{Notes: []string{"note" + hostile}, LeakFound: []string{"leak" + hostile}},
		}},
		Failed:    1,
		Transport: "transport" + hostile,
	}
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b, true))
	out := b.String()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Fatalf("control byte %#x at %d in:\n%s", c, i, out)
		}
	}
	require.Contains(t, out, `mismatch\x1b[2J\x1b]0;title\x07\rPASS`)
	require.Contains(t, out, "  - two\n    lines", "a text of several lines stays indented")
	for _, s := range []string{"custom", "fault", "bound", "note", "leak", "transport"} {
		require.Contains(t, out, s+`\x1b[2J`)
	}
}

// TestWriteTextTimeColumn: the TIME column has one unit and its figures
// end in one column, whatever each scenario took.
func TestWriteTextTimeColumn(t *testing.T) {
	rep := audit.Report{Results: []audit.Result{
		{Name: "fast", Pass: true, Elapsed: 2 * time.Millisecond},
		{Name: "slow", Pass: true, Elapsed: 1212 * time.Millisecond},
		{Name: "slower", Pass: true, Elapsed: 123456 * time.Millisecond},
	}, Passed: 3}
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b, false))
	lines := strings.Split(b.String(), "\n")
	var ends []int
	for _, want := range []string{"0.002s", "1.212s", "123.456s"} {
		found := false
		for _, l := range lines {
			if i := strings.Index(l, want); i >= 0 {
				ends = append(ends, i+len(want))
				found = true
			}
		}
		require.True(t, found, "%s in:\n%s", want, b.String())
	}
	require.Equal(t, ends[0], ends[1], b.String())
	require.Equal(t, ends[0], ends[2], b.String())
}

// TestRunOneCutByTheRun: a scenario that the run's own context ends (its
// -deadline, an interrupt) has no verdict: one mismatch says so, with no
// fix, instead of every mismatch the cut itself caused.
func TestRunOneCutByTheRun(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.RunOne(ctx, scenario(t, "trickle-body"))
	require.False(t, res.Pass)
	require.Equal(t, "cut: the run ended (context canceled) before the scenario did; no verdict", res.Skipped)
	require.Empty(t, res.Mismatches)
	require.Empty(t, res.Fix)

	var text strings.Builder
	require.NoError(t, audit.Report{Results: []audit.Result{res}, Skipped: 1, Incomplete: true}.WriteText(&text, false))
	require.Regexp(t, `(?m)^trickle-body +cut: no verdict +- +- +- +SKIP$`, text.String())
}

// The scenario that leaves a body open closes it itself once the check has
// found it: its row says the audit closed the connection, not the client,
// and the goroutines it shows are one note, not one note each.
func TestUnclosedBodyClosedByTheAudit(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	rep := r.Run(t.Context(), []audit.Scenario{scenario(t, "unclosed-body")})
	require.True(t, rep.OK(), "%v", rep.Results[0].Mismatches)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.Contains(t, text.String(), "\n  closed by the audit: it closed the body left open once the check had found it (early-body-close)\n")
	require.NotContains(t, text.String(), "closed by client")
	var notes []string
	for _, n := range rep.Results[0].Observed.Notes {
		if strings.Contains(n, "holds the body open on purpose") {
			notes = append(notes, n)
		}
	}
	require.Len(t, notes, 1, "%q", rep.Results[0].Observed.Notes)
	require.Contains(t, notes[0], "(net/http.(*persistConn).readLoop)")
	require.Contains(t, notes[0], "(net/http.(*persistConn).writeLoop)")
}

// TestHealthCheckOnADarkConnection: on h2/go-dark a transport's HTTP/2
// health check is a bound the runner sees. Shorter than the header bound,
// it ends the request itself (the other outcome the scenario allows);
// longer, the runner waits for it to close the connection; longer than
// the guard deadline, no verdict, and the fix says so; none at all, the fix
// names it. Each outcome and fate is what the client did (pinned by
// TestTruth's h2/dark-ping cases).
func TestHealthCheckOnADarkConnection(t *testing.T) {
	withPing := func(rht, ping, timeout time.Duration) func() *http.Transport {
		return func() *http.Transport {
			tr := &http.Transport{ResponseHeaderTimeout: rht, ForceAttemptHTTP2: true}
			if ping > 0 {
				tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: ping, PingTimeout: timeout}
			}
			return tr
		}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name           string
		transport      func() *http.Transport
		guard          time.Duration
		pass           bool
		class          httptrace.Class
		beyond, fix    string
		note, mismatch string
	}{
		{name: "the check first", transport: withPing(2*time.Second, 200*ms, 200*ms), pass: true,
			class: httptrace.ClassTimeout, note: "the HTTP/2 health check ended the request before the header bound did"},
		{name: "the header bound first", transport: withPing(200*ms, 400*ms, 400*ms), pass: true,
			class: httptrace.ClassResponseHeaderTimeout},
		{name: "beyond the guard", transport: withPing(200*ms, time.Second, time.Second), guard: time.Second,
			beyond: "SendPingTimeout 1s + PingTimeout 1s", mismatch: "beyond the guard: the HTTP/2 health check",
			fix: "audit.GuardDeadline(2s) waits for the HTTP/2 health check (SendPingTimeout 1s + PingTimeout 1s)"},
		{name: "none", transport: withPing(200*ms, 0, 0), class: httptrace.ClassResponseHeaderTimeout,
			mismatch: "connection fate: expected closed by client (ping-timeout), observed open",
			fix:      "set the Transport's HTTP/2 health check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []audit.Option{audit.WithTransport(tc.name, tc.transport), audit.Protocols(httpProtocols(false, true))}
			if tc.guard > 0 {
				opts = append(opts, audit.GuardDeadline(tc.guard))
			}
			r, err := audit.NewRunner(opts...)
			require.NoError(t, err)
			res := r.RunOne(context.Background(), scenario(t, "h2/go-dark"))
			require.Equal(t, tc.pass, res.Pass, "%v", res.Mismatches)
			require.Equal(t, tc.beyond, res.Observed.Beyond)
			if tc.class != "" {
				require.Equal(t, tc.class, res.Observed.Class, "%v", res.Observed.Error)
			}
			if tc.pass {
				require.Equal(t, pool.ReasonPingTimeout, res.Observed.Fate.Reason)
				require.True(t, res.Observed.Recovered)
				require.Empty(t, res.Fix)
			} else {
				require.True(t, slices.ContainsFunc(res.Mismatches, func(m string) bool { return strings.HasPrefix(m, tc.mismatch) }),
					"%q", res.Mismatches)
				require.Contains(t, res.Fix, tc.fix)
			}
			if tc.note != "" {
				require.Contains(t, strings.Join(res.Observed.Notes, "\n"), tc.note)
			}
		})
	}
}

// A retry layer of the caller's may share state between the layers its
// configure returns (a retry budget, a circuit breaker): unless
// audit.Parallel is given, its contracts run one at a time, in their
// order, so that such state is met the same way on every run.
func TestCallersLayerOneContractAtATime(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	layer := func(p retry.Policy) (audit.RetryFunc, error) {
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			return p.Do(ctx, c, req)
		}, nil
	}
	var ended []string
	r, err := audit.NewRunner(audit.WithRetry("counted", layer), audit.OnResult(func(res audit.Result) {
		ended = append(ended, res.Name)
	}))
	require.NoError(t, err)
	require.Equal(t, 8, r.Parallel(), "the default")
	contracts := retryContracts(t)
	rep := r.Run(t.Context(), contracts)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.True(t, rep.OK(), text.String())
	require.Equal(t, 1, most, "contracts of the caller's layer at once")
	require.Equal(t, audit.Names(contracts), ended, "in their order")
	reported := make([]string, len(rep.Results))
	for i, res := range rep.Results {
		reported[i] = res.Name
	}
	require.Equal(t, audit.Names(contracts), reported, "the report in their order")
}
