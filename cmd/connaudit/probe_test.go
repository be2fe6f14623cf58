package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/connaudit/connaudit/internal/testserver"

	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// probeServer is a loopback HTTP server that answers "ok", closing every
// closeEvery-th connection's response with "Connection: close" when
// closeEvery > 0, and counts the connections it accepted.
type probeServer struct {
	*httptest.Server
	accepted testserver.Counter
}

func newProbeServer(t *testing.T, closeEvery int, tlsOn bool) *probeServer {
	t.Helper()
	s := &probeServer{}
	hs := httptest.NewUnstartedServer(nil)
	testserver.ServeOK(hs, closeEvery, nil, &s.accepted)
	if tlsOn {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	s.Server = hs
	t.Cleanup(hs.Close)
	return s
}

// probeRawTCP starts a TCP server that calls handle on each connection.
func probeRawTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	return testserver.Raw(t, handle).Addr().String()
}

// probeHangingPort returns a loopback address whose accept queue is full, so a
// dial to it hangs: backlog 0, never accepting, one connection held.
func probeHangingPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	rc, err := ln.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var lerr error
	require.NoError(t, rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }))
	require.NoError(t, lerr)
	held, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { held.Close() })
	return ln.Addr().String()
}

// probeCertFile writes the server's certificate as PEM and returns its path.
func probeCertFile(t *testing.T, s *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// probeCLI runs connaudit in process and returns the exit code and outputs.
func probeCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// requireProbeError checks an error exit: code want, one line on stderr
// starting with the command's name, no stack trace.
func requireProbeError(t *testing.T, want, code int, stderr string) {
	t.Helper()
	require.Equal(t, want, code, "stderr: %s", stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.True(t, strings.HasPrefix(stderr, "connaudit probe: "), "%q", stderr)
	require.NotContains(t, stderr, "goroutine")
	require.NotContains(t, stderr, "panic")
}

func TestProbeUsageErrors(t *testing.T) {
	t.Parallel()
	url := "http://" + testserver.ClosedPort(t) + "/"
	cases := map[string][]string{
		"no URL":                {},
		"two URLs":              {url, url},
		"n zero":                {"-n", "0", url},
		"n absurd":              {"-n", "1000001", url},
		"c zero":                {"-c", "0", url},
		"c over n":              {"-n", "3", "-c", "5", url},
		"negative conns":        {"-conns", "-1", url},
		"negative gap":          {"-gap", "-1s", url},
		"zero deadline":         {"-deadline", "0s", url},
		"zero timeout":          {"-timeout", "0s", url},
		"bad fail-on":           {"-fail-on", "sometimes", url},
		"zero max-idle":         {"-max-idle", "0s", url},
		"max-requests 1":        {"-max-requests", "1", url},
		"http1 and http2":       {"-http1", "-http2", url},
		"http2 over http":       {"-http2", url},
		"malformed URL":         {"http://[::1/"},
		"ftp":                   {"ftp://127.0.0.1/"},
		"no host":               {"http:///path"},
		"port out of range":     {"http://127.0.0.1:99999/"},
		"disallowed IDNA rune":  {"http://\u2488.example/"},
		"invalid IDNA label":    {"http://-\u00fc-.example/"},
		"missing -d file":       {"-d", "@" + filepath.Join(t.TempDir(), "missing"), url},
		"missing -cacert":       {"-cacert", filepath.Join(t.TempDir(), "missing.pem"), url},
		"unwritable -o":         {"-o", filepath.Join(t.TempDir(), "no", "such", "dir"), url},
		"secret malformed URL":  {"http://alice:hunter2@[::1/?token=s3cr3t"},
		"secret opaque URL":     {"http:alice:hunter2@127.0.0.1/?token=s3cr3t"},
		"secret ftp URL":        {"ftp://alice:hunter2@127.0.0.1/?token=s3cr3t"},
		"secret port out range": {"http://alice:hunter2@127.0.0.1:99999/?token=s3cr3t"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := probeCLI(t, append([]string{"probe"}, args...)...)
			requireProbeError(t, exitUsage, code, stderr)
			require.Empty(t, stdout)
			require.NotContains(t, stderr, "hunter2")
			require.NotContains(t, stderr, "s3cr3t")
		})
	}
}

func TestProbeUnusableTargets(t *testing.T) {
	t.Parallel()
	junk := probeRawTCP(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "this is not HTTP\r\n\r\n")
		}
	})
	banner := probeRawTCP(t, func(c net.Conn) {
		io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
		io.Copy(io.Discard, io.LimitReader(c, 1<<16))
	})
	tlsSrv := newProbeServer(t, 0, true)
	_, tlsPort, err := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	require.NoError(t, err)
	cases := []struct {
		name, url string
		args      []string
		want      string
	}{
		{"refused", "http://" + testserver.ClosedPort(t), nil, "connect-refused"},
		{"refused on localhost", "http://localhost:" + probePortOf(t, testserver.ClosedPort(t)), nil, "connect-refused"},
		{"unreachable", "http://" + probeHangingPort(t), []string{"-timeout", "200ms", "-deadline", "1s"}, "@connect"},
		{"garbage", "http://" + junk, nil, "protocol"},
		{"speaks first", "http://" + banner, nil, "no request succeeded"},
		{"untrusted certificate", tlsSrv.URL, nil, "tls"},
		{"name mismatch", "https://localhost:" + tlsPort, []string{"-cacert", probeCertFile(t, tlsSrv.Server)}, "not localhost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Secrets in the URL must not come out anywhere.
			u := strings.Replace(tc.url, "://", "://alice:hunter2@", 1) + "/p?token=s3cr3t"
			args := append(append([]string{"probe", "-n", "2"}, tc.args...), u)
			code, stdout, stderr := probeCLI(t, args...)
			requireProbeError(t, exitUnreachable, code, stderr)
			require.Contains(t, stderr, "unusable target")
			require.Contains(t, stderr, tc.want)
			for _, out := range []string{stdout, stderr} {
				require.NotContains(t, out, "hunter2")
				require.NotContains(t, out, "s3cr3t")
			}
		})
	}
}

func probePortOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return port
}

func TestProbeDeadlineEndsTheRun(t *testing.T) {
	t.Parallel()
	// The handler never answers; the run must return at -deadline.
	hs := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)
	code, _, stderr := probeCLI(t, "probe", "-n", "3", "-deadline", "300ms", hs.URL)
	requireProbeError(t, exitUnreachable, code, stderr)
	require.Contains(t, stderr, "no request succeeded")
	require.Contains(t, stderr, "deadline")
}

// probeJSON is the part of the JSON report the tests read.
type probeJSON struct {
	Schema       string         `json:"schema"`
	Requests     int            `json:"requests"`
	Dials        int64          `json:"dials"`
	PerfectDials int            `json:"perfect_dials"`
	Outcomes     map[string]int `json:"outcomes"`
	Connections  []struct {
		ID          uint64 `json:"id"`
		Requests    int    `json:"requests"`
		ClosedBy    string `json:"closed_by"`
		CloseReason string `json:"close_reason"`
	} `json:"connections"`
	Stages struct {
		New    map[string]json.RawMessage `json:"new"`
		Reused map[string]json.RawMessage `json:"reused"`
	} `json:"stages"`
	Findings []struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
	} `json:"findings"`
	Discovery *struct {
		Requests    int   `json:"requests"`
		Dials       int64 `json:"dials"`
		MaxRequests struct {
			Found bool `json:"found"`
			Limit int  `json:"limit"`
		} `json:"max_requests"`
	} `json:"discovery"`
	Timelines []json.RawMessage `json:"timelines"`
}

func TestProbeJSON(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 3, false)
	code, stdout, stderr := probeCLI(t, "probe", "-json", "-n", "6", "-find-max-requests", "-max-requests", "10", s.URL)
	require.Equal(t, exitOK, code, "a warning does not fail the default -fail-on error: %s", stderr)
	require.Empty(t, stderr)
	var rep probeJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Equal(t, "connaudit.probe/v1", rep.Schema)
	require.Equal(t, 6, rep.Requests)
	require.Equal(t, map[string]int{"ok": 6}, rep.Outcomes)
	require.EqualValues(t, 2, rep.Dials)
	require.Equal(t, 1, rep.PerfectDials)
	require.Len(t, rep.Connections, 2)
	for _, c := range rep.Connections {
		require.Equal(t, 3, c.Requests)
		require.Equal(t, "server", c.ClosedBy)
		require.Equal(t, "connection-close", c.CloseReason)
	}
	for _, stage := range []string{"dns", "connect", "tls", "pool_wait", "write", "server", "transfer", "total"} {
		require.Contains(t, rep.Stages.New, stage)
		require.Contains(t, rep.Stages.Reused, stage)
	}
	require.NotNil(t, rep.Discovery)
	require.True(t, rep.Discovery.MaxRequests.Found)
	require.Equal(t, 3, rep.Discovery.MaxRequests.Limit)
	require.Equal(t, s.accepted.Load(), rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
	require.Len(t, rep.Findings, 1)
	require.Equal(t, "server-closes-every-n", rep.Findings[0].ID)
	require.Equal(t, "warn", rep.Findings[0].Severity)
	require.Empty(t, rep.Timelines, "timelines only with -v")
}

func TestProbeFailOn(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 2, false)
	for _, tc := range []struct {
		level string
		code  int
	}{{"warn", exitFail}, {"info", exitFail}, {"error", exitOK}, {"none", exitOK}} {
		code, _, stderr := probeCLI(t, "probe", "-n", "4", "-fail-on", tc.level, s.URL)
		require.Equal(t, tc.code, code, "-fail-on %s: %s", tc.level, stderr)
	}
	// A failed request is an error.
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler) // drop the connection: a failed request
	}))
	t.Cleanup(hs.Close)
	code, stdout, _ := probeCLI(t, "probe", "-n", "2", "-json", hs.URL)
	require.Equal(t, exitUnreachable, code, "nothing succeeded: an unusable target")
	require.Contains(t, stdout, `"request-errors"`, "the report still comes out")
}

func TestProbeTextReport(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	code, stdout, stderr := probeCLI(t, "probe", "-n", "5", "-v", s.URL)
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stderr, "no progress line and no warning off a terminal")
	require.Regexp(t, `\ndials +1; would be 1 with perfect keep-alive\n`, stdout)
	require.Contains(t, stdout, "findings\n  none")
	require.Contains(t, stdout, "reuse saves")
	require.Equal(t, 5, strings.Count(stdout, "  events\n"), "-v: one waterfall per request")
	require.NotContains(t, stdout, "\x1b[", "no colour off a terminal")
	require.EqualValues(t, 1, s.accepted.Load())
}

func TestProbeOutputFile(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	path := filepath.Join(t.TempDir(), "report.json")
	code, stdout, stderr := probeCLI(t, "probe", "-n", "2", "-json", "-o", path, s.URL)
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stdout)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep probeJSON
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Equal(t, 2, rep.Requests)
}

func TestProbeTLSFlags(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, true)
	t.Run("-k warns", func(t *testing.T) {
		code, stdout, stderr := probeCLI(t, "probe", "-n", "2", "-k", s.URL)
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "connaudit probe: warning: -k: TLS certificates are not verified\n", stderr)
		require.Contains(t, stdout, "h2-not-offered")
	})
	t.Run("-cacert", func(t *testing.T) {
		code, _, stderr := probeCLI(t, "probe", "-n", "2", "-cacert", probeCertFile(t, s.Server), s.URL)
		require.Equal(t, exitOK, code, stderr)
		require.Empty(t, stderr)
	})
	t.Run("-http2 required", func(t *testing.T) {
		code, stdout, _ := probeCLI(t, "probe", "-n", "1", "-k", "-http2", s.URL)
		require.Equal(t, exitFail, code, "HTTP/2 was required and not offered")
		require.Contains(t, stdout, "ERROR h2-not-offered")
	})
}

func TestProbeSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	u := strings.Replace(s.URL, "://", "://alice:hunter2@", 1) + "/p?token=s3cr3t"
	for _, format := range [][]string{{"-v"}, {"-v", "-json"}} {
		args := append(append([]string{"probe", "-n", "2", "-H", "Authorization: Bearer s3cr3t-bearer",
			"-H", "Cookie: id=s3cr3t-cookie"}, format...), u)
		code, stdout, stderr := probeCLI(t, args...)
		require.Equal(t, exitOK, code, stderr)
		for _, out := range []string{stdout, stderr} {
			require.NotContains(t, out, "hunter2")
			require.NotContains(t, out, "alice")
			require.NotContains(t, out, "s3cr3t")
		}
		require.Contains(t, stdout, "token=REDACTED")
	}
}

func TestProbeHelp(t *testing.T) {
	t.Parallel()
	code, stderr, _ := probeCLI(t, "probe", "-h") // help asked for: on stdout
	require.Equal(t, exitOK, code)
	for _, flag := range []string{"-n", "-c", "-conns", "-gap", "-X", "-H", "-d", "-k", "-http1", "-http2",
		"-timeout", "-deadline", "-json", "-o", "-v", "-fail-on", "-find-max-requests", "-find-idle-timeout", "-max-idle"} {
		require.Regexp(t, regexp.MustCompile(`\n  `+regexp.QuoteMeta(flag)+`[ \t\n]`), stderr, "flag %s documented", flag)
	}
}

func TestProgressAndColour(t *testing.T) {
	// Not parallel: it sets NO_COLOR.
	require.Nil(t, newProgressLine(&bytes.Buffer{}), "no progress line off a terminal")
	require.False(t, isTerminal(&bytes.Buffer{}))
	var nilLine *progressLine
	nilLine.clear() // harmless

	var b bytes.Buffer
	l := &progressLine{w: &b}
	l.update(probe.Progress{Phase: "requests", Done: 1, Total: 9, Elapsed: progressAfter / 2})
	require.Empty(t, b.String(), "nothing in the first second")
	l.update(probe.Progress{Phase: "requests", Done: 5, Total: 9, Dials: 2, Elapsed: progressAfter})
	require.Equal(t, "\r\x1b[Kprobe: requests 5/9, 2 dials (1s)", b.String())
	l.clear()
	require.True(t, strings.HasSuffix(b.String(), "\r\x1b[K"))
	require.Equal(t, "probe: find-idle-timeout 4 requests, idle 400ms (2.5s)",
		progressText(probe.Progress{Phase: "find-idle-timeout", Done: 4, Idle: 400e6, Elapsed: 2500e6}))

	t.Setenv("NO_COLOR", "")
	require.False(t, useColor(os.Stdout), "NO_COLOR set, even empty: no colour")
}

// TestProbeFlagDefaults: the defaults of -n and -client-idle, and the bound
// on -n and -max-requests, are the probe's own.
func TestProbeFlagDefaults(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	req, err := http.NewRequest(http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	rep, err := probe.Run(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, defaultProbeRequests, rep.Requested)
	require.Equal(t, defaultClientIdle, rep.IdleConnTimeout)

	// Options are checked before the target: a nil target's error means
	// the options were accepted.
	const nilTarget = "probe: nil target request"
	for _, opt := range []probe.Option{probe.Requests(maxProbeRequests), probe.FindMaxRequests(maxProbeRequests)} {
		_, err := probe.Run(t.Context(), nil, opt)
		require.EqualError(t, err, nilTarget)
	}
	for _, opt := range []probe.Option{probe.Requests(maxProbeRequests + 1), probe.FindMaxRequests(maxProbeRequests + 1)} {
		_, err := probe.Run(t.Context(), nil, opt)
		require.ErrorContains(t, err, fmt.Sprintf("to %d", maxProbeRequests))
	}
}

// -c alone runs a worker per connection, as hey does: -conns defaults to
// -c, not 1 (four workers queued on one connection); given, it is kept.
// -h says so, with no number for a default.
func TestProbeConnsDefaultsToC(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	for _, tc := range []struct {
		args []string
		cap  int
	}{
		{[]string{"-n", "8", "-c", "4"}, 4},
		{[]string{"-n", "8", "-c", "4", "-conns", "1"}, 1},
		{[]string{"-n", "8", "-c", "4", "-conns", "0"}, 0},
		{[]string{"-n", "2"}, 1},
	} {
		code, stdout, stderr := probeCLI(t, append(append([]string{"probe", "-s", "-json"}, tc.args...), s.URL)...)
		require.Equal(t, exitOK, code, stderr)
		var rep struct {
			MaxConns int `json:"max_conns"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
		require.Equal(t, tc.cap, rep.MaxConns, "%v", tc.args)
	}
	_, help, _ := probeCLI(t, "probe", "-h")
	require.Contains(t, help, "by default\n    \t-c: a connection per worker, as hey has\n")
}
