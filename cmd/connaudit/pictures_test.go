package main

import (
	"encoding/json"
	"os"
	"os/exec"
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

var (
	setRE    = regexp.MustCompile(`<h2>[^<]* (s\d+-[0-9a-f]+: [^<]*?)(?: <span[^>]*>[^<]*</span>)?</h2>`)
	laneRE   = regexp.MustCompile(`<g class="lane[^"]*" data-conn="(\d+)">`)
	reasonAt = regexp.MustCompile(`<tspan class="reason">([^<]*)</tspan>`)
)

// TestServePicture: serve -html draws, for each session's scenario, a lane
// per connection its JSON lists, each with the JSON's close (how the
// server saw it closed: fin, rst) or none while it is open. The curl kit
// on ok and reset: the server resets reset's connection, so that one close
// at least is known when the verdict is given.
func TestServePicture(t *testing.T) {
	for _, tool := range []string{"curl", "jq", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	kit, err := filepath.Abs("../../kits/curl/example.sh")
	require.NoError(t, err)
	t.Setenv("CONNAUDIT_RUN", "^(ok|reset)$")
	page := filepath.Join(t.TempDir(), "serve.html")
	code, out, errOut := runCLI(t, "serve", "-json", "-html", page, "--", kit)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	var doc struct {
		Sessions []struct {
			Session string `json:"session"`
			Results []struct {
				Name   string `json:"name"`
				Server struct {
					Connections []struct {
						ID  uint64 `json:"id"`
						How string `json:"how"`
					} `json:"connections"`
				} `json:"server"`
			} `json:"results"`
		} `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Sessions, 1)
	want := map[string][]string{}
	var conns, reset int
	for _, s := range doc.Sessions {
		for _, r := range s.Results {
			key := s.Session + ": " + r.Name
			for _, c := range r.Server.Connections {
				want[key] = append(want[key], jsonID(c.ID)+" "+c.How)
				conns++
				if c.How == "rst" {
					reset++
				}
			}
		}
	}
	require.Positive(t, reset, "reset's connection reset by the server, as the page must show: %s", out)

	b, err := os.ReadFile(page)
	require.NoError(t, err)
	html := string(b)
	require.Equal(t, conns, strings.Count(html, `<g class="lane`), "a lane per connection of the JSON")
	got := map[string][]string{}
	sections := strings.Split(html, `<section class="set"`)[1:]
	require.Len(t, sections, len(want), "a set per scenario with connections")
	for _, sec := range sections {
		m := setRE.FindStringSubmatch(sec)
		require.NotNil(t, m, "a set's title names its session and scenario:\n%s", sec)
		key := m[1]
		for _, lane := range strings.Split(sec, `<g class="lane`)[1:] {
			lane = `<g class="lane` + lane
			id := laneRE.FindStringSubmatch(lane)
			require.NotNil(t, id, lane)
			how := ""
			if r := reasonAt.FindStringSubmatch(lane); r != nil {
				how = r[1]
			}
			got[key] = append(got[key], id[1]+" "+how)
		}
	}
	require.Equal(t, want, got, "each scenario's lanes and their closes as the JSON lists them")
}
