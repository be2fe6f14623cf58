package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
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

// The footer says that the scenarios' waits are summed over scenarios run
// side by side, and how many ran at once: a run shorter than its waits'
// sum is not a contradiction.
func TestScenariosFooterSaysTheWaitsAreSummed(t *testing.T) {
	for _, tc := range []struct{ parallel, says string }{
		{"2", "(the scenarios' own waits, summed over those run 2 at once: "},
		{"1", "(the scenarios' own waits, summed over those run one at a time: "},
	} {
		code, out, errOut := runCLI(t, "scenarios", "-run", "^(ok|h2/ok)$", "-parallel", tc.parallel)
		require.Equal(t, exitOK, code, "stderr: %s\nstdout: %s", errOut, out)
		require.Contains(t, out, "2 passed, 0 failed in ", out)
		require.Contains(t, strings.ReplaceAll(out, "\n    ", " "), tc.says, out)
	}
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

// One at a time (-parallel 1), the first scenario selected waits 150ms for
// its timeout, so the 1ms deadline has passed by the time it ends (or it
// ended it): the second is never started. Whether the first started is up
// to the clock; the second is reported skipped either way, in the text,
// the JSON and the JUnit reports, and the run fails.
func TestScenariosDeadlineStopsTheRun(t *testing.T) {
	const sel = "^(response-header-timeout|attempt-deadline)$"
	code, out, errOut := runCLI(t, "scenarios", "-run", sel, "-deadline", "1ms", "-parallel", "1")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "stopped after")
	row := rowOf(t, out, "attempt-deadline")
	require.Equal(t, "SKIP", row[len(row)-1], "no scenario starts after the deadline")
	require.Contains(t, row, "not")
	require.Contains(t, out, " skipped in ")

	junit := filepath.Join(t.TempDir(), "report.xml")
	code, out, errOut = runCLI(t, "scenarios", "-run", sel, "-deadline", "1ms", "-json", "-junit", junit, "-parallel", "1")
	require.Equal(t, exitFail, code, errOut)
	var rep struct {
		Results []struct {
			Name    string `json:"name"`
			Pass    bool   `json:"pass"`
			Skipped string `json:"skipped"`
		} `json:"results"`
		Passed, Failed, Skipped int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Results, 2, "every scenario of the selection is listed")
	require.Equal(t, "response-header-timeout", rep.Results[0].Name)
	require.Equal(t, "attempt-deadline", rep.Results[1].Name)
	require.False(t, rep.Results[1].Pass)
	require.Equal(t, "not started: context deadline exceeded", rep.Results[1].Skipped)
	skipped := 0
	for _, res := range rep.Results {
		if res.Skipped != "" {
			skipped++
		}
	}
	require.Positive(t, skipped)
	require.Equal(t, skipped, rep.Skipped)
	require.Equal(t, 2, rep.Passed+rep.Failed+rep.Skipped)

	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var suites struct {
		Suites []struct {
			Tests   int `xml:"tests,attr"`
			Skipped int `xml:"skipped,attr"`
			Cases   []struct {
				Name    string `xml:"name,attr"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b, &suites))
	require.Len(t, suites.Suites, 1)
	suite := suites.Suites[0]
	require.Equal(t, 2, suite.Tests)
	require.Equal(t, rep.Skipped, suite.Skipped)
	require.Len(t, suite.Cases, 2)
	require.Equal(t, "attempt-deadline", suite.Cases[1].Name)
	require.NotNil(t, suite.Cases[1].Skipped)
	require.Equal(t, "not started: context deadline exceeded", suite.Cases[1].Skipped.Message)
	require.Contains(t, string(b), `<skipped message="not started: context deadline exceeded"></skipped>`)
}

// TestScenariosCancelledBeforeAnyStarts runs with a context already ended
// (as an interrupt would leave it): no scenario runs, each is reported
// skipped, and the run fails.
func TestScenariosCancelledBeforeAnyStarts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"scenarios", "-run", "^(ok|reset)$"}, &stdout, &stderr)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr.String(), "stopped after 0 of 2 scenarios: context canceled")
	for _, name := range []string{"ok", "reset"} {
		row := rowOf(t, stdout.String(), name)
		require.Equal(t, "SKIP", row[len(row)-1], name)
	}
	require.Contains(t, stdout.String(), "0 passed, 0 failed, 2 skipped in ")
}

// rowOf returns the fields of the report table's row for scenario name.
func rowOf(t *testing.T, out, name string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row for %s in\n%s", name, out)
	return nil
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

// TestScenariosSelection: -run keeps, -skip leaves out, -proto keeps the
// scenarios over the protocols listed.
func TestScenariosSelection(t *testing.T) {
	code, out, errOut := runCLI(t, "scenarios", "-list", "-run", "(^|/)reset$|trickle", "-skip", "^h2/trickle")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, []string{"reset", "trickle-body", "h2/reset"}, listed(out))

	code, out, errOut = runCLI(t, "scenarios", "-list", "-run", "reset", "-proto", "h2")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, []string{"h2/reset"}, listed(out))

	code, out, errOut = runCLI(t, "scenarios", "-list", "-run", "^(h2/)?ok$", "-proto", "http1, h2")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, []string{"ok", "h2/ok"}, listed(out))

	code, out, errOut = runCLI(t, "scenarios", "-run", "^(h2/)?status-404$", "-skip", "^h2/")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "1 passed, 0 failed in ")
	require.NotContains(t, out, "h2/status-404")

	for _, args := range [][]string{
		{"-proto", "h3"},
		{"-skip", "("},
		{"-skip", "."},
		{"-run", "^h2/", "-proto", "http1"},
	} {
		code, out, errOut := runCLI(t, append([]string{"scenarios"}, args...)...)
		require.Equal(t, exitUsage, code, "%q", args)
		require.Empty(t, out, "%q", args)
		require.True(t, strings.HasPrefix(errOut, "connaudit scenarios: audit: "), "%q: %s", args, errOut)
	}
}

// listed returns the scenario names of a -list output.
func listed(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n")[1:] {
		if l != "" && l[0] != ' ' {
			names = append(names, strings.Fields(l)[0])
		}
	}
	return names
}

// TestScenariosFitHundredColumns: the whole catalogue's report, its list
// and the command's usage fit a terminal 100 columns wide.
func TestScenariosFitHundredColumns(t *testing.T) {
	code, out, errOut := runCLI(t, "scenarios")
	require.Equal(t, exitOK, code, "stderr: %s\nstdout: %s", errOut, out)
	_, list, _ := runCLI(t, "scenarios", "-list")
	_, usage, _ := runCLI(t, "scenarios", "-h") // help goes to stdout
	for name, text := range map[string]string{"report": out, "list": list, "usage": usage} {
		require.NotEmpty(t, text, name)
		for _, l := range strings.Split(text, "\n") {
			require.LessOrEqual(t, len([]rune(strings.ReplaceAll(l, "\t", "        "))), 100, "%s: %q", name, l)
		}
	}
	for _, name := range []string{"ok", "h2/connection-close", "retry/response-header-timeout"} {
		row := rowOf(t, out, name)
		require.Equal(t, "PASS", row[len(row)-1], name)
	}
}
