package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/hostile"
	"github.com/stretchr/testify/require"
)

// probeHostile starts a hostile server answering every connection with
// reply and returns its URL.
func probeHostile(t *testing.T, reply hostile.Reply) string {
	t.Helper()
	h, err := hostile.New(reply)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h.URL()
}

// bodyServer starts a raw server that answers each request with head, then
// writes body every 20ms (every time when fast), up to n times or until a
// write fails.
func bodyServer(t *testing.T, head, body string, n int, fast bool) string {
	t.Helper()
	return "http://" + probeRawTCP(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range n {
			if _, err := io.WriteString(c, body); err != nil {
				return
			}
			if !fast {
				<-tick.C
			}
		}
	})
}

// TestProbeBodyNotEnded: for a server whose body does not end within the
// bounds of a request (it stalls, trickles, is chunked and never
// terminated, goes on past -max-body), or ends before its declared length,
// probe exits 1 as trace does: the request failed with the tracer's class
// (the one "error" for a body past -max-body, which the tracer calls ok),
// and the report's request-errors says what fixes it.
func TestProbeBodyNotEnded(t *testing.T) {
	t.Parallel()
	chunk := "1000\r\n" + strings.Repeat("x", 0x1000) + "\r\n"
	cases := []struct {
		name  string
		url   string
		args  []string
		class string // the probe's
		fix   string
	}{
		{"Content-Length never reached", probeHostile(t, hostile.Reply{Name: "stalled-body",
			Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly sixteen byt"), End: hostile.EndStall}),
			nil, "deadline", "did not end within the 300ms Timeout"},
		{"chunked never terminated", probeHostile(t, hostile.Reply{Name: "unterminated-chunked",
			Raw: []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), End: hostile.EndStall}),
			nil, "deadline", "did not end within the 300ms Timeout"},
		{"trickles", bodyServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", "x", 1000, false),
			nil, "deadline", "did not end within the 300ms Timeout"},
		{"never ends", bodyServer(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, 1<<14, true),
			[]string{"-max-body", "65536", "-timeout", "10s"}, "error", "went on past MaxBody (65536 bytes)"},
		{"ends before its length", probeHostile(t, hostile.Reply{Name: "short-body",
			Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly sixteen byt")}),
			[]string{"-timeout", "10s"}, "body-truncated", "ended before its declared length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The stalled bodies' bound; a case that is not about the
			// bound gives one a loaded machine cannot reach, after it.
			args := append([]string{"-timeout", "300ms"}, tc.args...)
			code, _, stderr := runCLIGuarded(t, append(append([]string{"trace"}, args...), tc.url)...)
			require.Equal(t, exitFail, code, "trace: %s", stderr)
			require.Contains(t, stderr, "reading the response's body")

			code, stdout, stderr := runCLIGuarded(t, append(append([]string{"probe", "-n", "2", "-json"}, args...), tc.url)...)
			require.Equal(t, exitFail, code, "probe agrees with trace: %s", stderr)
			requireProbeError(t, exitFail, code, stderr)
			require.True(t, strings.HasPrefix(stderr,
				"connaudit probe: unusable target: no request succeeded (2 of 2 failed): "+tc.class+" @body"), stderr)
			var rep probeJSON
			require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
			require.Equal(t, map[string]int{tc.class: 2}, rep.Outcomes)
			require.Len(t, rep.Findings, 1, "%+v", rep.Findings)
			require.Equal(t, "request-errors", rep.Findings[0].ID)
			require.Equal(t, "error", rep.Findings[0].Severity)
			require.Contains(t, rep.Findings[0].Message, tc.fix)
		})
	}
}

// TestProbeSomeBodiesNotEnded: when some bodies stall and other requests
// succeed, probe exits 1 on its request-errors finding (-fail-on error),
// and exits 0 only when told to fail on nothing.
func TestProbeSomeBodiesNotEnded(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "only sixteen byt")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)
	code, stdout, stderr := runCLIGuarded(t, "probe", "-n", "3", "-timeout", "1s", hs.URL)
	requireProbeError(t, exitFail, code, stderr)
	require.Equal(t, "connaudit probe: 1 finding(s) at or above -fail-on error\n", stderr)
	require.Contains(t, stdout, "requests        3 in ")
	require.Contains(t, stdout, ": ok 2 (200 ×2), deadline 1\n")
	require.Contains(t, strings.ReplaceAll(stdout, "\n        ", " "), "  ERROR request-errors: 1 of 3 requests failed: deadline @body ×1; first: probe: request timeout reached; "+
		"the body of 1 response(s) did not end within the 1s Timeout")
	code, _, stderr = runCLIGuarded(t, "probe", "-n", "3", "-timeout", "1s", "-fail-on", "none", hs.URL)
	require.Equal(t, exitOK, code, stderr)
}
