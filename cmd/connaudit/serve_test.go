package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/serve"
	"github.com/stretchr/testify/require"
)

// TestServeUsage: a command missing after --, arguments without --, a
// command not found and a bad pattern are usage errors.
func TestServeUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--"},
		{"serve", "extra"},
		{"serve", "--", "/nonexistent/kit"},
		{"serve", "-run", "(", "--", "true"},
		{"serve", "-deadline", "0", "--", "true"},
	} {
		code, _, errOut := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: %s", args, errOut)
	}
}

// TestServeNothingJudged: a command that succeeds without auditing any
// scenario is a failure (exit 1), and says so; one that fails is too.
func TestServeNothingJudged(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	code, _, errOut := runCLI(t, "serve", "--", "sh", "-c", "exit 0")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "the command audited no scenario: nothing was judged")
	code, _, errOut = runCLI(t, "serve", "--", "sh", "-c", "exit 3")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, `kit "sh -c exit 3" failed: it exited with status 3 before any scenario was judged`)
}

// TestServeHelpFindings: serve's -h says what the code does: a finding
// fails no session, an interrupt that cut none short is how serve stops.
func TestServeHelpFindings(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "serve", "-h")
	require.Equal(t, exitOK, code)
	require.NotContains(t, out, "had a finding")
	require.Contains(t, out, "open-at-done) fails no session by itself")
	require.Contains(t, out, "an interrupt that cut no session short is how\n     serve stops")
}

// TestServeFailedSessionSaid: a failed session's line on stderr gives the
// same five counts as its text's last line, which add up to the scenarios
// offered, and a session's error.
func TestServeFailedSessionSaid(t *testing.T) {
	t.Parallel()
	var errOut strings.Builder
	code := serveExit(true, &serve.RunOutcome{Sessions: 2, Judged: 47, Failed: []*serve.SessionReport{
		{Client: serve.Client{Name: "curl"}, Session: "s1-7f3a", Passed: 45, Failed: 2, NotConfigurable: 4, Skipped: 2},
		{Client: serve.Client{Name: "requests"}, Session: "s2-9c1d", Passed: 3, NotReported: 50,
			Error: "the server stopped before the kit said done"},
	}}, &errOut)
	require.Equal(t, exitFail, code)
	require.Equal(t, "connaudit serve: curl s1-7f3a failed (53 scenarios):\n"+
		"    45 passed, 2 failed, 4 not configurable, 2 skipped, 0 not reported\n"+
		"connaudit serve: requests s2-9c1d failed (53 scenarios):\n"+
		"    3 passed, 0 failed, 0 not configurable, 0 skipped, 50 not reported; the server stopped before\n"+
		"    the kit said done\n", errOut.String())
}

// TestServeCurlKit: the curl kit's example under connaudit serve, on two
// scenarios it passes, exits 0 with their verdicts; with JUnit XML too.
func TestServeCurlKit(t *testing.T) {
	for _, tool := range []string{"curl", "jq", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	kit, err := filepath.Abs("../../kits/curl/example.sh")
	require.NoError(t, err)
	t.Setenv("CONNAUDIT_RUN", "^(ok|reset)$")
	junit := filepath.Join(t.TempDir(), "serve.xml")
	code, out, errOut := runCLI(t, "serve", "-junit", junit, "--", kit)
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "2 passed, 0 failed")
	require.Contains(t, out, "reset ")
	for _, l := range strings.Split(out, "\n") {
		require.LessOrEqual(t, len([]rune(l)), 100, "%q", l)
	}
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var suites struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b, &suites))
	require.Len(t, suites.Suites, 1)
	require.Equal(t, 2, suites.Suites[0].Tests)
	require.True(t, strings.HasPrefix(suites.Suites[0].Name, "connaudit serve: curl "))
	// The same kit configured against A5 (curl's --retry retries a 500):
	// exit 1, with the server's counts.
	t.Setenv("CONNAUDIT_RUN", "^retry/500$")
	code, out, _ = runCLI(t, "serve", "-json", "--", kit)
	require.Equal(t, exitFail, code)
	require.Contains(t, out, `"A5: 500 was retried: 3 requests, contract 1"`)
}

// lineSignal is a writer that signals its first line containing want.
type lineSignal struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	got  chan string
	sent bool
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.sent && strings.Contains(l.buf.String(), l.want) {
		l.sent = true
		l.got <- l.buf.String()
	}
	return len(p), nil
}

func (l *lineSignal) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestServeUntilInterrupted: without --, serve says its address, reports
// each session as it ends, and exits when interrupted: 0 when it cut no
// session short and none failed, 1 when a session failed (one that said
// done having reported nothing) or the interrupt cut one short (its
// unreported scenarios and its error said).
func TestServeUntilInterrupted(t *testing.T) {
	for _, c := range []string{"idle", "failed", "cut"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errOut := &lineSignal{want: "CONNAUDIT_URL=", got: make(chan string, 1)}
			out := &lineSignal{want: "not reported in", got: make(chan string, 1)}
			done := make(chan int, 1)
			go func() { done <- run(ctx, []string{"serve", "-run", "^ok$"}, out, errOut) }()
			var line string
			select {
			case line = <-errOut.got:
			case <-time.After(10 * time.Second):
				t.Fatal("no address said")
			}
			url := strings.Fields(strings.SplitN(line, "CONNAUDIT_URL=", 2)[1])[0]
			post := func(u, body string) map[string]any {
				resp, err := http.Post(u, "application/json", strings.NewReader(body))
				require.NoError(t, err)
				defer resp.Body.Close()
				var m map[string]any
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
				return m
			}
			want := exitFail
			switch c {
			case "idle":
				want = exitOK
			case "failed":
				opened := post(url+"/v1/sessions", `{"protocol":"connaudit.serve/v1","kit":"t","client":{"name":"nothing"}}`)
				post(opened["done_url"].(string), `{}`)
				select {
				case <-out.got:
				case <-time.After(10 * time.Second):
					t.Fatalf("the session's end was not reported: %s", out.String())
				}
				require.Contains(t, out.String(), "nothing (kit t, session s1-")
			case "cut":
				post(url+"/v1/sessions", `{"protocol":"connaudit.serve/v1","kit":"t","client":{"name":"cut"}}`)
			}
			cancel()
			select {
			case code := <-done:
				require.Equal(t, want, code, "stderr: %s", errOut.String())
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not stop when interrupted")
			}
			switch c {
			case "idle":
				require.Equal(t, 1, strings.Count(errOut.String(), "\n"), errOut.String())
				require.Empty(t, out.String())
			case "cut":
				require.Contains(t, out.String(), "not reported: the session ended before the kit reported it")
				require.Contains(t, errOut.String(), "connaudit serve: cut s1-")
				require.Contains(t, errOut.String(), " failed (1 scenario):\n    0 passed, 0 failed, 0 not configurable, "+
					"0 skipped, 1 not reported; the server stopped before the\n    kit said done\n")
			}
		})
	}
}
