package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// TestSchemelessURL: a URL without a scheme is an http one, as curl takes
// it, for trace and probe alike; "host:port" and "user:password@host" are
// no scheme and an opaque rest.
func TestSchemelessURL(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	_, port, err := net.SplitHostPort(s.Listener.Addr().String())
	require.NoError(t, err)
	for _, target := range []string{"127.0.0.1:" + port + "/p", "localhost:" + port + "/p", "//127.0.0.1:" + port + "/p",
		"alice:pw@127.0.0.1:" + port + "/p"} {
		code, out, errOut := runCLI(t, "trace", target)
		require.Equal(t, exitOK, code, "%s: %s", target, errOut)
		require.Contains(t, out, "GET http://", target)
		require.Contains(t, out, ":"+port+"/p\n", target)
		code, out, errOut = runCLI(t, "probe", "-n", "2", target)
		require.Equal(t, exitOK, code, "%s: %s", target, errOut)
		require.Contains(t, out, "probe GET http://", target)
	}
	for _, target := range []string{"ftp://127.0.0.1/", "http:127.0.0.1", "HTTPS:x", "://127.0.0.1/", ""} {
		code, _, errOut := runCLI(t, "trace", target)
		require.Equal(t, exitUsage, code, "%q: %s", target, errOut)
	}
}

// TestInterleave: flags and arguments come in any order; a value that
// follows a flag needing one is that flag's; after "--", only arguments.
func TestInterleave(t *testing.T) {
	t.Parallel()
	fs, _, _ := newTraceFlags(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"URL"}, []string{"--", "URL"}},
		{[]string{"-json", "URL"}, []string{"-json", "--", "URL"}},
		{[]string{"URL", "-H", "A: b", "-json"}, []string{"-H", "A: b", "-json", "--", "URL"}},
		{[]string{"URL", "-json=false", "--timeout=1s", "-k"}, []string{"-json=false", "--timeout=1s", "-k", "--", "URL"}},
		{[]string{"-H", "-json", "URL"}, []string{"-H", "-json", "--", "URL"}},
		{[]string{"-d", "--", "URL"}, []string{"-d", "--", "--", "URL"}},
		{[]string{"-d", "-", "URL"}, []string{"-d", "-", "--", "URL"}},
		{[]string{"URL", "--", "-json"}, []string{"--", "URL", "-json"}},
		{[]string{"-", "URL"}, []string{"--", "-", "URL"}},
		{[]string{"URL", "-H"}, []string{"-H"}}, // Parse says the value is missing
		{[]string{"-nope", "URL"}, []string{"-nope", "--", "URL"}},
		{[]string{"-json"}, []string{"-json"}},
		{nil, nil},
	} {
		require.Equal(t, tc.want, interleave(fs.FlagSet, tc.in), "%q", tc.in)
	}
}

// TestFlagsAfterURL: trace and probe take flags after the URL, as curl
// does; a flag missing its value is still an error.
func TestFlagsAfterURL(t *testing.T) {
	t.Parallel()
	var gotHeader atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader.Store(r.Header.Get("X-Test"))
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)

	code, out, errOut := runCLI(t, "trace", srv.URL+"/x", "-H", "X-Test: after", "-json")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "after", gotHeader.Load())
	var tl map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &tl), "-json after the URL was taken")

	code, out, errOut = runCLI(t, "probe", srv.URL, "-n", "3", "-json")
	require.Equal(t, exitOK, code, errOut)
	var rep probeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 3, rep.Requests)

	code, _, errOut = runCLI(t, "trace", srv.URL, "-H")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "connaudit trace: flag needs an argument: -H (connaudit trace -h for help)\n", errOut)
	code, _, errOut = runCLI(t, "trace", srv.URL, srv.URL)
	require.Equal(t, exitUsage, code)
	require.Equal(t, "connaudit trace: want exactly one URL, got 2 arguments (connaudit trace -h for help)\n", errOut)
}

// TestTraceFail: with -fail, a status of 400 or more exits 1 and says so;
// the trace is still written.
func TestTraceFail(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	code, out, errOut := runCLI(t, "trace", "-fail", srv.URL+"/missing")
	require.Equal(t, exitFail, code)
	require.Contains(t, out, "response    404 HTTP/1.1")
	require.Equal(t, "connaudit trace: -fail: the server answered 404 Not Found\n", errOut)

	code, _, errOut = runCLI(t, "trace", srv.URL+"/missing")
	require.Equal(t, exitOK, code, "without -fail, any status is a response")
	require.Empty(t, errOut)
	code, _, errOut = runCLI(t, "trace", srv.URL+"/", "-fail")
	require.Equal(t, exitOK, code, errOut)
	require.Empty(t, errOut)
}

// TestTraceBodyFailureSaysWhy: a response whose body the server cuts short
// exits 1 with the reason on stderr.
func TestTraceBodyFailureSaysWhy(t *testing.T) {
	t.Parallel()
	addr := probeRawTCP(t, func(c net.Conn) {
		readHead(c)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
	})
	code, out, errOut := runCLI(t, "trace", "http://"+addr+"/?token=T0kenValue")
	require.Equal(t, exitFail, code)
	require.Contains(t, out, "outcome     body-truncated @body")
	require.True(t, strings.HasPrefix(errOut, "connaudit trace: reading the response's body: body-truncated @body"), errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	require.NotContains(t, out+errOut, "T0kenValue")
}

// hangAfter returns a server that answers n requests, then holds each
// further one until its client goes, closing entered when the first of
// those arrives.
func hangAfter(t *testing.T, n int64) (string, <-chan struct{}) {
	t.Helper()
	var seen atomic.Int64
	entered := make(chan struct{})
	var once atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			io.WriteString(w, "ok")
			return
		}
		if once.CompareAndSwap(false, true) {
			close(entered)
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, entered
}

// runInterrupted runs args and cancels the run's context, as a signal
// would, once entered is closed.
func runInterrupted(t *testing.T, entered <-chan struct{}, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		select {
		case <-entered:
			cancel()
		case <-ctx.Done():
		}
	}()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestInterruptedExitsOne: a trace or probe interrupted (its context
// ended, as by a signal) exits 1 and says so, with what it has.
func TestInterruptedExitsOne(t *testing.T) {
	t.Parallel()
	url, entered := hangAfter(t, 0)
	code, out, errOut := runInterrupted(t, entered, "trace", url)
	require.Equal(t, exitFail, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Regexp(t, `^connaudit trace: interrupted: [^\n]*\n$`, errOut, "one line: the interrupt and the failure it caused")

	url, entered = hangAfter(t, 2)
	code, out, errOut = runInterrupted(t, entered, "probe", "-n", "10", "-fail-on", "none", "-json", url)
	require.Equal(t, exitFail, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, errOut, "connaudit probe: interrupted: 3 of 10 requests sent; the report covers those\n")
	var rep struct {
		Interrupted bool           `json:"interrupted"`
		Outcomes    map[string]int `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.True(t, rep.Interrupted)
	require.Equal(t, 2, rep.Outcomes["ok"])
}

// TestProbeCutByDeadlineExitsOne: a probe its deadline stopped after some
// requests succeeded exits 1, whatever -fail-on, and says how far it got.
// The server answers two requests and holds the third until the deadline;
// the two take far less than the deadline.
func TestProbeCutByDeadlineExitsOne(t *testing.T) {
	t.Parallel()
	url, _ := hangAfter(t, 2)
	code, out, errOut := runCLIGuarded(t, "probe", "-n", "10", "-deadline", "2s", "-fail-on", "none", "-json", url)
	require.Equal(t, exitFail, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Equal(t, "connaudit probe: -deadline 2s reached: 3 of 10 requests sent, 1 cut by it; the report covers what was done\n", errOut)
	var rep struct {
		DeadlineReached bool `json:"deadline_reached"`
		Cut             int  `json:"cut_by_deadline"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.True(t, rep.DeadlineReached)
	require.Equal(t, 1, rep.Cut)
}

// TestProbeExit maps reports to exit codes, a line on stderr for each
// failure.
func TestProbeExit(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/?token=T0kenValue", nil)
	require.NoError(t, err)
	rf := &requestFlags{}
	warn := []probe.Finding{{ID: "server-closes-every-n", Severity: "warn"}}
	for _, tc := range []struct {
		name     string
		rep      probe.Result
		unusable *probe.UnusableError
		failOn   string
		code     int
		stderr   string
	}{
		{"all well", probe.Result{Requests: 5, Requested: 5}, nil, "error", exitOK, ""},
		{"a finding below -fail-on", probe.Result{Requests: 5, Requested: 5, Findings: warn}, nil, "error", exitOK, ""},
		{"a finding at -fail-on", probe.Result{Requests: 5, Requested: 5, Findings: warn}, nil, "warn", exitFail,
			"connaudit probe: 1 finding(s) at or above -fail-on warn\n"},
		{"cut by the deadline", probe.Result{Requests: 93, Requested: 1000, Cut: 1, DeadlineReached: true}, nil, "none", exitFail,
			"connaudit probe: -deadline 1s reached: 93 of 1000 requests sent, 1 cut by it; the report covers what was done\n"},
		{"interrupted", probe.Result{Requests: 93, Requested: 1000, Interrupted: true}, nil, "none", exitFail,
			"connaudit probe: interrupted: 93 of 1000 requests sent; the report covers those\n"},
		{"no response", probe.Result{Requests: 2, Requested: 2, DeadlineReached: true},
			&probe.UnusableError{Sent: 2, Failed: 2, Class: "connect-refused", Stage: "connect"}, "error", exitUnreachable,
			"connaudit probe: unusable target: no request succeeded (2 of 2 failed): connect-refused @connect\n"},
		{"nothing sent before the deadline", probe.Result{Requested: 2, DeadlineReached: true},
			&probe.UnusableError{}, "error", exitFail,
			"connaudit probe: unusable target: no request was sent before the deadline\n"},
	} {
		pf := &probeFlags{failOn: tc.failOn, n: 1, c: 1, deadline: time.Second, clientIdle: time.Second, maxRequests: 2, maxIdle: time.Second}
		require.NoError(t, pf.validate())
		var b bytes.Buffer
		code := probeExit(&b, &tc.rep, tc.unusable, pf, rf, req)
		require.Equal(t, tc.code, code, tc.name)
		require.Equal(t, tc.stderr, b.String(), tc.name)
	}
}

// TestHelp: each command's -h, on stdout, lists its flags (version has
// none, and no heading for them), its exit status code by code and three
// examples (version: one); connaudit -h and "connaudit help CMD" too.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		code, out, errOut := runCLI(t, c.name, "-h")
		require.Equal(t, exitOK, code, c.name)
		require.Empty(t, errOut, c.name)
		require.True(t, strings.HasPrefix(out, "usage: connaudit "+c.name), c.name)
		if c.name == "version" {
			require.NotContains(t, out, "flags:", "no flags, no heading")
		} else {
			require.Contains(t, out, "\nflags:\n", c.name)
		}
		require.Contains(t, out, "\nexit status:\n  0  ", c.name)
		require.Contains(t, out, "\n  2  a usage error", c.name)
		if c.name == "trace" || c.name == "probe" {
			require.Contains(t, out, "\n  1  ", c.name)
			require.Contains(t, out, "\n  3  the target did not answer", c.name)
		}
		_, examples, ok := strings.Cut(out, "\nexamples:")
		require.True(t, ok, c.name)
		want := 3
		if c.name == "version" {
			want = 1
		}
		require.Equal(t, want, strings.Count(examples, "\n  connaudit "+c.name), c.name)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			// PrintDefaults indents a flag's text with 4 spaces and a tab:
			// 8 columns.
			require.LessOrEqual(t, len(strings.ReplaceAll(line, "\t", "    ")), 100, "%s: %q", c.name, line)
		}
		code, again, _ := runCLI(t, "help", c.name)
		require.Equal(t, exitOK, code)
		require.Equal(t, out, again, "connaudit help %s", c.name)
	}
	code, out, _ := runCLI(t, "-h")
	require.Equal(t, exitOK, code)
	for _, want := range []string{"\nexit status:\n", "\n  3  the target did not answer", "\nexamples:\n  connaudit "} {
		require.Contains(t, out, want)
	}
}

// TestExitCodesDocumented: the exit codes -h says are the constants.
func TestExitCodesDocumented(t *testing.T) {
	t.Parallel()
	for code, word := range map[int]string{exitOK: "all well", exitFail: "a failed audit", exitUsage: "a usage error",
		exitUnreachable: "the target did not answer"} {
		require.Contains(t, exitHelp, "\n  "+string(rune('0'+code))+"  "+word)
	}
}

// TestTraceUnreachable: no response (a refused port, an untrusted
// certificate, a response header timeout) is exit 3; a failed flag
// parse is exit 2.
func TestTraceUnreachable(t *testing.T) {
	t.Parallel()
	tlsSrv := newProbeServer(t, 0, true)
	silent, _ := hangAfter(t, 0)
	for _, args := range [][]string{
		{"trace", "http://" + testserver.ClosedPort(t) + "/"},
		{"trace", tlsSrv.URL},
		{"trace", "-timeout", "100ms", silent},
	} {
		code, _, errOut := runCLIGuarded(t, args...)
		require.Equal(t, exitUnreachable, code, "%q: %s", args, errOut)
		require.NotEmpty(t, errOut, "%q", args)
	}
}

// TestUserStringsEscaped: what the user typed (a path, a pattern, a flag,
// a command) comes back escaped on stderr, never raw: it can neither drive
// the terminal nor forge a line.
func TestUserStringsEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b[2J\x1b]0;pwned\x07\r\u009b31m\nFAKE"
	dir := t.TempDir()
	missing := filepath.Join(dir, hostile)
	url := "http://" + testserver.ClosedPort(t) + "/"
	for _, tc := range []struct {
		args  []string
		shown bool // the hostile text is quoted, escaped
	}{
		{[]string{"trace", "-d", "@" + missing, url}, true},
		{[]string{"trace", "-" + hostile, url}, true},
		{[]string{"trace", "-X", hostile, url}, true},
		{[]string{"trace", "-H", hostile + ": v", url}, true},
		{[]string{"trace", "-timeout", hostile, url}, true},
		{[]string{"trace", url + hostile}, false}, // "malformed URL: invalid control character in URL"
		{[]string{"probe", "-d", "@" + missing, url}, true},
		{[]string{"probe", "-cacert", missing, url}, true},
		{[]string{"probe", "-o", filepath.Join(missing, "report.json"), url}, true},
		{[]string{"probe", "-fail-on", hostile, url}, true},
		{[]string{"scenarios", "-run", "(" + hostile}, true},
		{[]string{"scenarios", "-run", hostile}, true},
		{[]string{"scenarios", "-junit", filepath.Join(missing, "report.xml"), "-run", "^ok$"}, true},
		{[]string{"scenarios", hostile}, true},
		{[]string{"version", hostile}, true},
		{[]string{hostile}, true},
	} {
		args := tc.args
		code, out, errOut := runCLIGuarded(t, args...)
		require.Equal(t, exitUsage, code, "%q: %s", args, errOut)
		require.Empty(t, out, "%q", args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%q: one line: %q", args, errOut)
		require.True(t, strings.HasSuffix(errOut, "\n"), "%q: %q", args, errOut)
		for _, c := range []string{"\x1b", "\x07", "\r", "\u009b"} {
			require.NotContains(t, errOut, c, "%q: a raw control character: %q", args, errOut)
		}
		if tc.shown {
			require.Contains(t, errOut, `\x1b[2J`, "%q: shown, escaped: %q", args, errOut)
		}
	}
	_, err := os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was created")
}

// TestPrintableWriter: each Write escaped, but the newline that ends it.
func TestPrintableWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := printableWriter{&b}
	for _, s := range []string{"a\x1b[1m\tb\n", "c\r\nFAKE\xff\n", "no newline", "\n"} {
		n, err := io.WriteString(w, s)
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	require.Equal(t, "a\\x1b[1m\tb\nc\\r\\nFAKE\\xff\nno newline\n", b.String())
	require.Equal(t, io.Writer(&b), unescaped(w))
	require.Equal(t, io.Writer(&b), unescaped(&b))
}

// TestFailuresSayWhy: a probe failed by its findings says so on stderr.
func TestFailuresSayWhy(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 2, false)
	code, _, errOut := runCLI(t, "probe", "-n", "4", "-fail-on", "warn", s.URL)
	require.Equal(t, exitFail, code)
	require.Equal(t, "connaudit probe: 1 finding(s) at or above -fail-on warn\n", errOut)
}

// methodServer answers "0123456789" and sends the method of each request
// it sees on methods.
func methodServer(t *testing.T) (string, <-chan string) {
	t.Helper()
	methods := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case methods <- r.Method:
		default:
		}
		io.WriteString(w, "0123456789")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, methods
}

// TestProbeDurationTooShort: a -duration too short for any request still
// sends one: the report is of what was sent, and the run is complete (not
// "no request was sent before the deadline", exit 1).
func TestProbeDurationTooShort(t *testing.T) {
	t.Parallel()
	url, methods := methodServer(t)
	code, stdout, stderr := probeCLI(t, "probe", "-json", "-duration", "1ns", "-c", "4", url)
	require.Equal(t, exitOK, code, stderr)
	var rep struct {
		Requests int            `json:"requests"`
		Outcomes map[string]int `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	// At least one; more if the timer came after several senders began.
	require.Positive(t, rep.Requests)
	require.Equal(t, rep.Requests, rep.Outcomes["ok"])
	require.Len(t, methods, rep.Requests, "the server saw each request")
}

// TestTraceMaxBodyCut: a body cut by -max-body is a body cut short, exit 1
// with the reason in one line, as the README lists it; a body of exactly
// -max-body bytes is whole.
func TestTraceMaxBodyCut(t *testing.T) {
	t.Parallel()
	url, _ := methodServer(t)
	code, out, errOut := runCLI(t, "trace", "-max-body", "4", url)
	require.Equal(t, exitFail, code, errOut)
	require.Contains(t, out, "outcome     ok")
	require.Equal(t, "connaudit trace: reading the response's body: stopped at -max-body 4 bytes, before its end\n", errOut)
	code, _, errOut = runCLI(t, "trace", "-max-body", "10", url)
	require.Equal(t, exitOK, code, errOut)
	require.Empty(t, errOut)
}

// TestCurlHabits: -I sends HEAD and -s is quiet (no warning, no progress
// line), as curl's flags do; a failure is still one line on stderr, and
// -I with another method or a body is a usage error.
func TestCurlHabits(t *testing.T) {
	t.Parallel()
	url, methods := methodServer(t)
	code, out, errOut := runCLI(t, "trace", "-I", url)
	require.Equal(t, exitOK, code, errOut)
	require.True(t, strings.HasPrefix(out, "HEAD "+url), out)
	require.Equal(t, http.MethodHead, <-methods)
	code, _, errOut = runCLI(t, "probe", "-I", "-n", "2", url)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, http.MethodHead, <-methods)
	require.Equal(t, http.MethodHead, <-methods)

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(tlsSrv.Close)
	for _, cmd := range []string{"trace", "probe"} {
		code, _, errOut = runCLI(t, cmd, "-k", tlsSrv.URL)
		require.Equal(t, exitOK, code, errOut)
		require.Contains(t, errOut, "warning: -k")
		code, _, errOut = runCLI(t, cmd, "-s", "-k", tlsSrv.URL)
		require.Equal(t, exitOK, code, errOut)
		require.Empty(t, errOut, "-s: no warning")
		code, _, errOut = runCLI(t, cmd, "-s", "http://"+testserver.ClosedPort(t)+"/")
		require.Equal(t, exitUnreachable, code)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "-s: a failure is still one line: %q", errOut)
		require.Contains(t, errOut, "refused")
	}
	for args, want := range map[string]string{
		"-I -X POST": "-I (HEAD) and -X POST ask for two methods",
		"-I -d x":    "-I sends HEAD, which carries no body: drop -d",
	} {
		code, out, errOut = runCLI(t, append(append([]string{"trace"}, strings.Fields(args)...), url)...)
		require.Equal(t, exitUsage, code, args)
		require.Empty(t, out)
		require.Contains(t, errOut, want, args)
	}
	require.Empty(t, methods, "no request for a usage error")
}

// TestProbeAnsweredButBodiesFailed: a target that answered every request
// and cut every body short did answer: exit 1 (a failed audit), not 3,
// with the reason on stderr.
func TestProbeAnsweredButBodiesFailed(t *testing.T) {
	t.Parallel()
	addr := probeRawTCP(t, func(c net.Conn) {
		readHead(c)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
	})
	code, _, errOut := probeCLI(t, "probe", "-n", "2", "http://"+addr+"/")
	require.Equal(t, exitFail, code, errOut)
	require.Contains(t, errOut, "unusable target: no request succeeded (2 of 2 failed): body-truncated @body")
}
