package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProbeVerboseJSONLines: with -v -json every line of the output is a
// JSON value: one timeline per request as it ended, then the report.
func TestProbeVerboseJSONLines(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	code, stdout, stderr := probeCLI(t, "probe", "-v", "-json", "-n", "4", s.URL)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 5, stdout)
	for _, l := range lines[:4] {
		var tl struct {
			ID     uint64 `json:"id"`
			Status int    `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &tl), l)
		require.Equal(t, 200, tl.Status, l)
	}
	var rep probeJSON
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &rep), lines[4])
	require.Equal(t, "connaudit.probe/v1", rep.Schema)
	require.Equal(t, 4, rep.Requests)
	require.Empty(t, rep.Timelines, "the report keeps none")
}

// TestProbeVerboseToFile: with -v and -o, the file holds the waterfalls,
// then the report.
func TestProbeVerboseToFile(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	out := filepath.Join(t.TempDir(), "report.txt")
	require.NoError(t, os.WriteFile(out, []byte("old content to be replaced\n"), 0o600))
	code, stdout, stderr := probeCLI(t, "probe", "-v", "-n", "3", "-o", out, s.URL)
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stdout)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	text := string(b)
	require.NotContains(t, text, "old content")
	i := strings.Index(text, "\nprobe GET ")
	require.Positive(t, i, text)
	require.Equal(t, 3, strings.Count(text[:i], "GET "+s.URL), "three waterfalls before the report:\n%s", text)
}

// TestProbeDuration: -duration sends requests for a time; the report says
// so, and the run is complete.
func TestProbeDuration(t *testing.T) {
	t.Parallel()
	s := newProbeServer(t, 0, false)
	code, stdout, stderr := probeCLI(t, "probe", "-json", "-duration", "100ms", "-c", "2", s.URL)
	require.Equal(t, exitOK, code, stderr)
	var rep struct {
		Requested         int     `json:"requested"`
		Requests          int     `json:"requests"`
		Duration          int64   `json:"duration_ns"`
		DeadlineReached   bool    `json:"deadline_reached"`
		RequestsPerSecond float64 `json:"requests_per_second"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Equal(t, maxProbeRequests, rep.Requested)
	require.Positive(t, rep.Requests)
	require.EqualValues(t, 100_000_000, rep.Duration)
	require.False(t, rep.DeadlineReached)
	require.Positive(t, rep.RequestsPerSecond)
}

// TestProbeDeadlineCutIsAFailure: a probe the deadline stopped after some
// requests succeeded is a failed audit (exit 1), with a line on stderr.
func TestProbeDeadlineCutIsAFailure(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Write([]byte("ok"))
			return
		}
		<-r.Context().Done() // the others never answer
	}))
	t.Cleanup(hs.Close)
	code, stdout, stderr := probeCLI(t, "probe", "-n", "3", "-deadline", "300ms", hs.URL)
	require.Equal(t, exitFail, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "-deadline 300ms reached")
	require.Contains(t, stdout, "deadline-reached")
}
