package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// traceEvents reads a Trace Event Format file and counts its events by
// phase and category ("X request", "i close").
func traceEvents(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		TraceEvents []struct {
			Ph  string `json:"ph"`
			Cat string `json:"cat"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &f), "the trace is JSON")
	n := map[string]int{}
	for _, e := range f.TraceEvents {
		n[e.Ph+" "+e.Cat]++
	}
	return n
}

var reasonRE = regexp.MustCompile(`<g class="lane[^"]*" data-conn="(\d+)">(?s:.*?)<tspan class="reason">([^<]*)</tspan>`)

// TestProbePictures: -html draws a lane per connection the JSON lists,
// each with the JSON's close reason; -trace-events a slice per request and
// a close per closed connection.
func TestProbePictures(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 3, false)
	dir := t.TempDir()
	page, trace := filepath.Join(dir, "p.html"), filepath.Join(dir, "p.json")
	code, stdout, stderr := probeCLI(t, "probe", "-json", "-n", "6", "-html", page, "-trace-events", trace, s.URL)
	require.Equal(t, exitOK, code, stderr)
	var rep probeJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Len(t, rep.Connections, 2)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	html := string(b)
	require.Equal(t, len(rep.Connections), strings.Count(html, `<g class="lane`))
	require.Equal(t, 6, strings.Count(html, `<g class="req`), "a bar per request")
	got := map[string]string{}
	for _, m := range reasonRE.FindAllStringSubmatch(html, -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{}
	for _, c := range rep.Connections {
		want[jsonID(c.ID)] = c.CloseReason
	}
	require.Equal(t, want, got)
	n := traceEvents(t, trace)
	require.Equal(t, 6, n["X request"])
	require.Equal(t, 2, n["i close"])
	require.Equal(t, 2, n["i conn"], "a dial per connection")
}

func jsonID(id uint64) string { return strconv.FormatUint(id, 10) }

// TestPictureFlagsRefuseADirectory: a file that cannot be written is a
// usage error before the run, and no report file is left.
func TestPictureFlagsRefuseADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"probe", "-html", dir, "http://127.0.0.1:1/"},
		{"probe", "-trace-events", dir, "http://127.0.0.1:1/"},
		{"trace", "-html", dir, "http://127.0.0.1:1/"},
		{"scenarios", "-run", "^ok$", "-html", dir},
	} {
		code, _, stderr := probeCLI(t, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		flag := "-html"
		if args[1] == "-trace-events" {
			flag = args[1]
		}
		require.Contains(t, stderr, flag+": ", "%v", args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	}
}

// TestScenariosPicture: a lane set per scenario, with its verdict.
func TestScenariosPicture(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page, trace := filepath.Join(dir, "s.html"), filepath.Join(dir, "s.json")
	code, _, stderr := probeCLI(t, "scenarios", "-run", "^(ok|reset)$", "-html", page, "-trace-events", trace)
	require.Equal(t, exitOK, code, stderr)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	html := string(b)
	require.Equal(t, 2, strings.Count(html, `<section class="set"`))
	require.Equal(t, 2, strings.Count(html, `<span class="verdict">pass</span>`))
	require.Contains(t, html, "reset")
	require.GreaterOrEqual(t, traceEvents(t, trace)["X request"], 2)
}

// TestTracePicture: trace -html draws the request's waterfall.
func TestTracePicture(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	dir := t.TempDir()
	page, trace := filepath.Join(dir, "t.html"), filepath.Join(dir, "t.json")
	code, _, stderr := probeCLI(t, "trace", "-html", page, "-trace-events", trace, s.URL+"/x?token=hush")
	require.Equal(t, exitOK, code, stderr)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	html := string(b)
	require.Equal(t, 1, strings.Count(html, `<section class="waterfall"`))
	require.Contains(t, html, "<title>total ")
	require.Contains(t, html, "got-conn conn=#1")
	require.NotContains(t, html, "hush", "the URL's query redacted")
	tb, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.NotContains(t, string(tb), "hush")
	require.Equal(t, 1, traceEvents(t, trace)["X request"])
}
