package audittest_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/audit/audittest"
)

// The shape a child process runs when this test binary is run again by
// the tests below: "reference" or "plain" (&http.Transport{}).
const shapeEnv = "AUDITTEST_SHAPE"

// TestShape is run only as a child of the tests below, which pick its
// subtests with -test.run and read what go test printed.
func TestShape(t *testing.T) {
	var opts []audit.Option
	switch os.Getenv(shapeEnv) {
	case "":
		t.Skip("run by TestSubtests as a child process")
	case "serial":
		opts = append(opts, audit.Parallel(1))
	case "plain":
		opts = append(opts, audit.WithTransport("&http.Transport{}", func() *http.Transport { return &http.Transport{} }))
	case "meet":
		m := &meet{both: make(chan struct{})}
		opts = append(opts, audit.WithTransport("dials that meet", func() *http.Transport {
			return &http.Transport{DialContext: m.dial}
		}))
		t.Cleanup(func() { t.Logf("dials met: %v", m.met) })
	case "contracts":
		audittest.RunContracts(t)
		return
	}
	audittest.Run(t, opts...)
}

// meet is a dial that waits, for up to a minute, until two scenarios
// have dialed (each scenario's dials carry its pprof label): the first two
// scenarios dial at once, or neither waits for the other.
type meet struct {
	mu     sync.Mutex
	dialed []string // the scenarios' labels
	met    bool     // the first scenario's dial met the second's
	both   chan struct{}
}

func (m *meet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	label, _ := pprof.Label(ctx, "connaudit.scenario")
	m.mu.Lock()
	if !slices.Contains(m.dialed, label) {
		if m.dialed = append(m.dialed, label); len(m.dialed) == 2 {
			close(m.both)
		}
	}
	first := len(m.dialed) < 2
	m.mu.Unlock()
	wait := time.NewTimer(time.Minute)
	defer wait.Stop()
	select {
	case <-m.both:
		m.mu.Lock()
		m.met = m.met || first // the first scenario's dial waited, and another scenario dialed
		m.mu.Unlock()
	case <-wait.C:
	case <-ctx.Done():
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// child runs this test binary's TestShape with shape and args, and returns
// what it printed and whether it passed.
func child(t *testing.T, shape string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), shapeEnv+"="+shape)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
	}
	return string(out), err == nil
}

var runLine = regexp.MustCompile(`(?m)^=== RUN   TestShape/(.+)$`)

// runs lists the subtests a child ran.
func runs(out string) []string {
	var names []string
	for _, m := range runLine.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

// -run picks scenarios by name as it picks subtests: one level per part of
// the name, so that "connect-hang$" is one scenario and "^h2/" the
// HTTP/2 ones.
func TestSubtests(t *testing.T) {
	out, ok := child(t, "reference", "-test.run", "^TestShape$/connect-hang$")
	require.True(t, ok, out)
	require.Equal(t, []string{"connect-hang"}, runs(out), out)
	require.Contains(t, out, "--- PASS: TestShape/connect-hang")

	out, ok = child(t, "reference", "-test.run", "^TestShape$/^h2/(ok|reset)$")
	require.True(t, ok, out)
	require.Equal(t, []string{"h2/ok", "h2/reset"}, runs(out), out)

	out, ok = child(t, "reference", "-test.run", "^TestShape$/^reset$")
	require.True(t, ok, out)
	require.Equal(t, []string{"reset"}, runs(out), "h2/reset is not reset: %s", out)
}

// A scenario the client fails fails its own subtest, with its mismatches
// and fix; the others pass beside it.
func TestFailedSubtest(t *testing.T) {
	out, ok := child(t, "plain", "-test.run", "^TestShape$/^(ok|response-header-timeout)$")
	require.False(t, ok, out)
	require.Equal(t, []string{"ok", "response-header-timeout"}, runs(out), out)
	require.Contains(t, out, "--- PASS: TestShape/ok")
	require.Contains(t, out, "--- FAIL: TestShape/response-header-timeout")
	require.Contains(t, out, "unbounded: no timeout fired at stage await-headers")
	require.Contains(t, out, "fix: set ResponseHeaderTimeout")
	require.Contains(t, out, "timeline:", "-v adds the faulted request's timeline")
	require.Equal(t, 1, strings.Count(out, "--- FAIL: TestShape/"), out)
}

// The subtests run side by side unless audit.Parallel(1) says one at a
// time, each judged alone.
func TestParallelSubtests(t *testing.T) {
	out, ok := child(t, "reference", "-test.run", "^TestShape$/^(ok|reset|trickle-body|early-body-close)$")
	require.True(t, ok, out)
	require.ElementsMatch(t, []string{"ok", "reset", "trickle-body", "early-body-close"}, runs(out), out)
	require.Equal(t, 4, strings.Count(out, "=== PAUSE TestShape/"), out)
	require.Equal(t, 4, strings.Count(out, "--- PASS: TestShape/"), out)

	out, ok = child(t, "serial", "-test.run", "^TestShape$/^(ok|reset)$")
	require.True(t, ok, out)
	require.Equal(t, []string{"ok", "reset"}, runs(out), out)
	require.NotContains(t, out, "=== PAUSE", out)
	require.Equal(t, 2, strings.Count(out, "--- PASS: TestShape/"), out)
}

// go test's -parallel does not bound how many scenarios run at once: with
// -parallel 1, two scenarios' dials still meet.
func TestScenariosBeyondTestParallel(t *testing.T) {
	out, ok := child(t, "meet", "-test.run", "^TestShape$/^(ok|status-404)$", "-test.parallel", "1")
	require.True(t, ok, out)
	require.Equal(t, []string{"ok", "status-404"}, runs(out), out)
	require.Contains(t, out, "dials met: true", out)
}

// RunContracts runs the retry contracts, and nothing else.
func TestRunContracts(t *testing.T) {
	var want []string
	for _, s := range audit.Catalogue() {
		if s.Contract != "" {
			want = append(want, s.Name)
		}
	}
	require.NotEmpty(t, want)
	out, ok := child(t, "contracts", "-test.run", "^TestShape$")
	require.True(t, ok, out)
	require.Equal(t, want, runs(out), out)
	require.Equal(t, len(want), strings.Count(out, "--- PASS: TestShape/"), out)
}

// -v shows a passing scenario's notes once each, at the line of the test
// that ran the catalogue (the subtest is a helper's), not inside
// audittest: the unclosed body's goroutines are one note.
func TestNotesOnceAtTheCaller(t *testing.T) {
	out, ok := child(t, "reference", "-test.run", "^TestShape$/^unclosed-body$")
	require.True(t, ok, out)
	require.Equal(t, 1, strings.Count(out, "holds the body open on purpose"), out)
	require.Regexp(t, `(?m)^\s+audittest_test\.go:\d+: the scenario's goroutines while it holds the body open`, out)
	require.NotContains(t, out, "audittest.go:", out)
}
