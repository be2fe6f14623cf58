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
	require.Contains(t, errOut, "sh failed: exit status 3")
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
// each session as it ends, and exits when interrupted (1: the session it
// saw was not reported).
func TestServeUntilInterrupted(t *testing.T) {
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
	opened := post(url+"/v1/sessions", `{"protocol":"connaudit.serve/v1","kit":"t","client":{"name":"nothing"}}`)
	post(opened["done_url"].(string), `{}`)
	select {
	case <-out.got:
	case <-time.After(10 * time.Second):
		t.Fatalf("the session's end was not reported: %s", out.String())
	}
	require.Contains(t, out.String(), "nothing (kit t, session s1-")
	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitFail, code)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop when interrupted")
	}
}
