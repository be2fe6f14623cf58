package probe_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

func TestJSONSchema(t *testing.T) {
	t.Parallel()
	s := goServer(t, 2, withTLS)
	rep := mustProbe(t, s, probe.Requests(4), probe.FindMaxRequests(4), probe.FindIdleTimeout(100e6))
	var b strings.Builder
	require.NoError(t, rep.WriteJSON(&b))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.String()), &m))
	for _, key := range []string{"schema", "target", "method", "requested", "requests", "concurrency", "max_conns",
		"gap_ns", "timeout_ns", "deadline_ns", "client_idle_timeout_ns", "elapsed_ns", "main_elapsed_ns", "deadline_reached", "outcomes",
		"statuses", "hidden_retries", "extra_attempts", "dials", "dial_errors", "perfect_dials",
		"requests_per_connection", "protocols", "tls", "connections", "closed_by", "stages", "discovery", "findings",
		// Written when zero too, as documented.
		"cut_by_deadline", "interrupted", "failures", "dials_abandoned", "connections_omitted"} {
		require.Contains(t, m, key)
	}
	require.Equal(t, []any{}, m["failures"])
	require.Equal(t, "connaudit.probe/v1", m["schema"])
	require.Positive(t, rep.MainElapsed)
	require.Less(t, rep.MainElapsed, rep.Elapsed, "discovery ran after the main run")
	require.EqualValues(t, 4, m["requests"])
	require.EqualValues(t, 2, m["dials"])
	require.EqualValues(t, 1, m["perfect_dials"])
	require.Equal(t, map[string]any{"ok": float64(4)}, m["outcomes"])
	conns := m["connections"].([]any)
	require.Len(t, conns, 2)
	for _, c := range conns {
		c := c.(map[string]any)
		require.EqualValues(t, 2, c["requests"])
		require.EqualValues(t, 2, c["responses"])
		require.Equal(t, "server", c["closed_by"])
		require.Equal(t, "connection-close", c["close_reason"])
		require.Equal(t, "TLS 1.3", c["tls_version"])
	}
	stages := m["stages"].(map[string]any)
	for _, group := range []string{"new", "reused"} {
		set := stages[group].(map[string]any)
		for _, stage := range []string{"count", "dns", "connect", "tls", "pool_wait", "write", "server", "transfer", "total"} {
			require.Contains(t, set, stage)
		}
		require.Contains(t, set["total"], "p99_ns")
	}
	require.Contains(t, stages, "reuse_saves_ns")
	disc := m["discovery"].(map[string]any)
	require.Contains(t, disc, "max_requests")
	require.Contains(t, disc, "idle_timeout")
	for _, f := range m["findings"].([]any) {
		f := f.(map[string]any)
		require.Len(t, f, 3)
		require.Contains(t, f, "id")
		require.Contains(t, []any{"info", "warn", "error"}, f["severity"])
		require.NotEmpty(t, f["message"])
	}
	require.NotContains(t, m, "timelines", "only with KeepTimelines")
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	s := goServer(t, 3)
	rep := mustProbe(t, s, probe.Requests(6), probe.FindMaxRequests(10))
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b, false))
	out := b.String()
	require.NotContains(t, out, "\x1b[", "colour is the CLI's")
	for _, want := range []string{
		"requests        6 in ",
		"dials           2; would be 1 with perfect keep-alive",
		"#1-#2          HTTP/1.1, 3 request(s), closed by server: connection-close",
		"new connection (2)",
		"reused connection (4)",
		"max requests per connection: 3 (Connection: close) [3 requests]",
		"WARN  server-closes-every-n: ",
	} {
		require.Contains(t, out, want)
	}
}

// textSection writes rep as text and returns the section after heading, up
// to the next blank line, and its lines.
func textSection(t *testing.T, rep *probe.Result, heading string) (string, []string) {
	t.Helper()
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b, false))
	_, section, ok := strings.Cut(b.String(), heading)
	require.True(t, ok, b.String())
	section, _, _ = strings.Cut(section, "\n\n")
	return section, strings.Split(section, "\n")
}

// TestWriteTextLongIDLists: a group of many connections with wide,
// scattered ids is listed briefly, within a bounded width, and the fates
// of every group still start in one column; the JSON keeps every
// connection.
func TestWriteTextLongIDLists(t *testing.T) {
	t.Parallel()
	rep := &probe.Result{Requested: 41, Requests: 41, Concurrency: 1, Outcomes: map[httptrace.Class]int{vocab.ClassOK: 41}}
	for id := uint64(100001); id <= 100079; id += 2 { // 40 connections, no two consecutive
		rep.Connections = append(rep.Connections, probe.Connection{ID: id, Proto: "HTTP/1.1", Requests: 1, Responses: 1,
			ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose})
	}
	rep.Connections = append(rep.Connections, probe.Connection{ID: 100080, Proto: "HTTP/1.1", Requests: 1, Responses: 1})
	section, lines := textSection(t, rep, "\nconnections\n")
	require.Len(t, lines, 2, section)
	require.True(t, strings.HasPrefix(lines[0], "  #100001,#100003,… (40) "), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "  #100080 "), lines[1])
	col := func(l string) int { return utf8.RuneCountInString(l[:strings.Index(l, "HTTP/1.1")]) }
	require.Equal(t, col(lines[0]), col(lines[1]), "the fates line up:\n%s", section)
	require.LessOrEqual(t, col(lines[0]), 2+24+1, "the ids column is bounded:\n%s", section)

	var js strings.Builder
	require.NoError(t, rep.WriteJSON(&js))
	var decoded struct {
		Connections []struct {
			ID uint64 `json:"id"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(js.String()), &decoded))
	require.Len(t, decoded.Connections, 41)
	for i, c := range decoded.Connections[:40] {
		require.Equal(t, uint64(100001+2*i), c.ID)
	}
}

// TestWriteTextLongStageTimes: stage percentiles of seconds and more stay
// under their p50/p90/p99/max headings, each apart from the next.
func TestWriteTextLongStageTimes(t *testing.T) {
	t.Parallel()
	small := probe.Percentiles{P50: 120 * time.Microsecond, P90: 300 * time.Microsecond, P99: 900 * time.Microsecond, Max: time.Millisecond}
	long := probe.Percentiles{P50: 900 * time.Millisecond, P90: 1500 * time.Millisecond, P99: 12500 * time.Millisecond, Max: 2*time.Minute + 5*time.Second}
	set := probe.StageSet{Count: 3, DNS: small, Connect: small, TLS: small, PoolWait: small, Write: small, Server: long, Transfer: small, Total: long}
	rep := &probe.Result{Requested: 6, Requests: 6, Concurrency: 1, Outcomes: map[httptrace.Class]int{vocab.ClassOK: 6}}
	rep.Stages.New, rep.Stages.Reused = set, set
	section, lines := textSection(t, rep, "stages of successful requests\n")
	require.Len(t, lines, 10, section) // groups, headings, eight stages
	// ends returns where each of the last n fields of l ends.
	ends := func(l string, n int) []int {
		var e []int
		for i := range len(l) {
			if l[i] != ' ' && (i+1 == len(l) || l[i+1] == ' ') {
				e = append(e, i+1)
			}
		}
		require.GreaterOrEqual(t, len(e), n, "%q", l)
		return e[len(e)-n:]
	}
	require.Equal(t, []string{"p50", "p90", "p99", "max", "p50", "p90", "p99", "max"}, strings.Fields(lines[1]))
	want := ends(lines[1], 8)
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		require.True(t, strings.HasSuffix(l, "ms"), l)
		require.GreaterOrEqual(t, len(f), 9, "a name and eight cells, each apart: %q", l)
		for _, cell := range f[len(f)-8:] {
			require.True(t, strings.HasSuffix(cell, "ms") && strings.Count(cell, "ms") == 1, "one time per cell: %q in %q", cell, l)
		}
		require.Equal(t, want, ends(l, 8), "aligned under the headings:\n%s", section)
	}
	require.Contains(t, section, " 125000.000ms")
	require.Equal(t, want[3]+2, strings.Index(lines[0], "reused connection (3)"),
		"the reused group starts over its columns:\n%s", section)
}

// TestWriteTextTimes checks that the requests line gives the main run's
// time, not the whole probe's, which discovery may make much longer.
func TestWriteTextTimes(t *testing.T) {
	t.Parallel()
	rep := &probe.Result{
		Requested: 3, Requests: 3, Concurrency: 1, MaxConnsPerHost: 1,
		Elapsed: 7250 * time.Millisecond, MainElapsed: 2 * time.Millisecond,
		Outcomes: map[httptrace.Class]int{vocab.ClassOK: 3}, Statuses: map[int]int{200: 3},
		Dials: 3, DialsAbandoned: 1, PerfectDials: 1,
		Connections: []probe.Connection{
			{ID: 1, Proto: "HTTP/1.1", Requests: 2, Responses: 2, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose},
			{ID: 2, DialAbandoned: true},
			{ID: 3, Proto: "HTTP/1.1", Requests: 1, Responses: 1, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose},
		},
		Discovery: &probe.Discovery{Requests: 4, Dials: 2, MaxRequests: &probe.MaxRequestsResult{Requests: 4, Bound: 4}},
	}
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b, false))
	out := b.String()
	for _, want := range []string{
		"3 in 2ms: ok 3 (200 ×3)\n",
		"the whole probe took 7.25s",
		"3 (1 abandoned); would be 1",
		"#2             dial abandoned",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "failed")
}

// TestFindingsWrap: a finding longer than a line wraps to 100 columns, its
// later lines indented under its text, as the tables fit them; none is
// lost.
func TestFindingsWrap(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("the server closed the connection after its response; ", 5) + "fix the server"
	rep := &probe.Result{Method: "GET", Target: "http://127.0.0.1:1/", Findings: []probe.Finding{
		{ID: "request-errors", Severity: "error", Message: long},
		{ID: "hidden-retries", Severity: "warn", Message: "short"},
	}}
	section, _ := textSection(t, rep, "\nfindings\n")
	lines := strings.Split(strings.TrimRight(section, "\n"), "\n")
	require.Greater(t, len(lines), 3, section)
	require.True(t, strings.HasPrefix(lines[0], "  ERROR request-errors: the server closed"), section)
	for _, l := range lines[1 : len(lines)-1] {
		require.True(t, strings.HasPrefix(l, "        ") && l[8] != ' ', "%q", l)
	}
	require.Equal(t, "  WARN  hidden-retries: short", lines[len(lines)-1])
	for _, l := range lines {
		require.LessOrEqual(t, len([]rune(l)), 100, "%q", l)
	}
	require.Contains(t, strings.ReplaceAll(section, "\n        ", " "), "request-errors: "+long+"\n")
}
