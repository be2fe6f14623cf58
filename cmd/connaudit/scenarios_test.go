package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestScenariosSubset(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "report.xml")
	code, out, errOut := runCLI(t, "scenarios", "-run", "^(ok|reset|h2/ok)$", "-junit", junit)
	require.Equal(t, exitOK, code, "stderr: %s\nstdout: %s", errOut, out)
	require.Contains(t, out, "3 passed, 0 failed")
	require.Contains(t, out, "reset")
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	require.Contains(t, string(b), `<testsuite name="connaudit" tests="3" failures="0"`)
}

func TestScenariosJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "scenarios", "-run", "^status-404$", "-json")
	require.Equal(t, exitOK, code, errOut)
	var rep struct {
		Results []struct {
			Name     string          `json:"name"`
			Pass     bool            `json:"pass"`
			Expected json.RawMessage `json:"expected"`
			Observed json.RawMessage `json:"observed"`
		} `json:"results"`
		Passed, Failed int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 1, rep.Passed)
	require.Zero(t, rep.Failed)
	require.Equal(t, "status-404", rep.Results[0].Name)
	require.True(t, rep.Results[0].Pass)
}

func TestScenariosVerbosePrintsTimelines(t *testing.T) {
	code, out, _ := runCLI(t, "scenarios", "-run", "^close-mid-body$", "-v")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "events")
	require.Contains(t, out, "body-close")
}

// The first scenario selected waits 150ms for its timeout, so the 1ms
// deadline has passed by the time it ends (or it ended it): the second is
// never started.
func TestScenariosDeadlineStopsTheRun(t *testing.T) {
	code, out, errOut := runCLI(t, "scenarios", "-run", "^(response-header-timeout|attempt-deadline)$", "-deadline", "1ms")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "stopped after")
	require.NotContains(t, out, "attempt-deadline", "no scenario starts after the deadline")
}

func TestScenariosList(t *testing.T) {
	code, out, _ := runCLI(t, "scenarios", "-list")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "hidden-retry")
	require.Contains(t, out, "h2/goaway")
}

func TestScenariosUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"scenarios", "-run", "("},
		{"scenarios", "-run", "no-such"},
		{"scenarios", "extra"},
		{"scenarios", "-nope"},
		{"scenarios", "-deadline", "0s"},
		{"nope"},
		{},
	} {
		code, _, errOut := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%q", args)
		require.NotEmpty(t, errOut, "%q", args)
		require.NotContains(t, errOut, "goroutine", "no stack trace")
	}
	code, out, _ := runCLI(t, "help")
	require.Equal(t, exitOK, code)
	require.True(t, strings.Contains(out, "scenarios"))
}

// TestScenariosJUnitFailsFast gives -junit a path that cannot be written:
// the usage error comes before any scenario runs.
func TestScenariosJUnitFailsFast(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "no", "such", "dir", "report.xml"), dir} {
		code, out, errOut := runCLI(t, "scenarios", "-run", "^ok$", "-junit", path)
		require.Equal(t, exitUsage, code, "%s: %s", path, errOut)
		require.Empty(t, out, "no scenario ran")
		require.True(t, strings.HasPrefix(errOut, "connaudit scenarios: -junit: "), errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	}
}
