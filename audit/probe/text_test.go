package probe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/audit/probe"
	"github.com/stretchr/testify/require"
)

func TestJSONSchema(t *testing.T) {
	t.Parallel()
	s := goServer(t, 2, withTLS)
	rep := mustProbe(t, s, probe.Requests(4), probe.FindMaxRequests(4), probe.FindIdleTimeout(100e6))
	var b strings.Builder
	require.NoError(t, probe.WriteJSON(&b, rep))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.String()), &m))
	for _, key := range []string{"schema", "target", "method", "requested", "requests", "concurrency", "max_conns",
		"gap_ns", "timeout_ns", "deadline_ns", "client_idle_timeout_ns", "elapsed_ns", "deadline_reached", "outcomes",
		"statuses", "hidden_retries", "extra_attempts", "dials", "dial_errors", "perfect_dials",
		"requests_per_connection", "protocols", "tls", "connections", "closed_by", "stages", "discovery", "findings"} {
		require.Contains(t, m, key)
	}
	require.Equal(t, probe.SchemaVersion, m["schema"])
	require.EqualValues(t, 4, m["requests"])
	require.EqualValues(t, 2, m["dials"])
	require.EqualValues(t, 1, m["perfect_dials"])
	require.Equal(t, map[string]any{"ok": float64(4)}, m["outcomes"])
	conns := m["connections"].([]any)
	require.Len(t, conns, 2)
	for _, c := range conns {
		c := c.(map[string]any)
		require.EqualValues(t, 2, c["requests"])
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
	var plain, color strings.Builder
	require.NoError(t, probe.WriteText(&plain, rep, probe.TextOptions{}))
	require.NoError(t, probe.WriteText(&color, rep, probe.TextOptions{Color: true}))
	out := plain.String()
	require.NotContains(t, out, "\x1b[")
	require.Contains(t, color.String(), "\x1b[33mWARN\x1b[0m")
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
