package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// goldenReport is a report with every part of the text filled in, for
// the probe's text and colour against testdata/probe/*.golden.
func goldenReport() *probe.Result {
	ms := time.Millisecond
	rep := &probe.Result{
		Schema: "connaudit.probe/v1", Target: "https://127.0.0.1:8443/x?token=REDACTED", Method: "GET",
		Requested: 12, Requests: 10, Concurrency: 2, MaxConnsPerHost: 2, Gap: 5 * ms, Timeout: 2 * time.Second,
		Deadline: 30 * time.Second, IdleConnTimeout: 90 * time.Second,
		Elapsed: 7250 * ms, MainElapsed: 1234567 * time.Microsecond / 1000,
		DeadlineReached: true, Cut: 1, Interrupted: true,
		Outcomes: map[httptrace.Class]int{vocab.ClassOK: 8, vocab.ClassReset: 1, vocab.ClassDeadline: 1},
		Statuses: map[int]int{200: 7, 503: 1},
		Failures: []probe.Failure{
			{Class: vocab.ClassReset, Stage: vocab.StageAwaitHeaders, Error: "read tcp: connection reset by peer", Count: 1},
			{Class: vocab.ClassDeadline, Stage: vocab.StageBody, Error: "context deadline exceeded", Count: 1},
		},
		HiddenRetries: 1, ExtraAttempts: 2,
		Dials: 6, DialErrors: 1, DialsAbandoned: 1, PerfectDials: 2,
		Protocols:          map[string]int{"HTTP/1.1": 3, "h2": 1},
		TLS:                &probe.TLSSummary{Versions: map[string]int{"TLS 1.3": 4}, Connections: 4, Resumed: 1, Resumable: 3, ALPN: "h2"},
		ConnectionsOmitted: 2,
		Connections: []probe.Connection{
			{ID: 1, Proto: "HTTP/1.1", TLSVersion: "TLS 1.3", Requests: 3, Responses: 3, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose},
			{ID: 2, Proto: "HTTP/1.1", TLSVersion: "TLS 1.3", TLSResumed: true, Requests: 3, Responses: 2, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonServerReset, CloseDetail: "reset"},
			{ID: 3, DialError: "dial tcp 127.0.0.1:8443: connect: connection refused"},
			{ID: 4, DialAbandoned: true},
			{ID: 5, Proto: "h2", TLSVersion: "TLS 1.3", Requests: 2, Responses: 2, ClosedBy: vocab.ClosedByClient, CloseReason: vocab.ReasonCloseIdle},
			{ID: 6, Proto: "HTTP/1.1", TLSVersion: "TLS 1.3", Requests: 1, Responses: 1, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose, CloseStatus: 503},
			{ID: 7, Proto: "HTTP/1.1", TLSVersion: "TLS 1.3", Requests: 3, Responses: 3, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonConnectionClose},
		},
		ClosedBy: map[vocab.CloseReason]int64{vocab.ReasonConnectionClose: 3, vocab.ReasonServerReset: 1, vocab.ReasonCloseIdle: 1},
		Discovery: &probe.Discovery{Requests: 9, Dials: 4,
			MaxRequests: &probe.MaxRequestsResult{Requests: 4, Bound: 10, Dials: 1, Found: true, Limit: 3, How: "connection-close", HiddenRetry: true, ErrorResponses: 1},
			IdleTimeout: &probe.IdleTimeoutResult{Requests: 5, Trials: 3, Dials: 3, Max: 5 * time.Second, Found: true, Survived: 200 * ms, Closed: 400 * ms, Complete: true},
		},
		Findings: []probe.Finding{
			{ID: "request-errors", Severity: "error", Message: "2 of 10 requests failed: reset @await-headers ×1"},
			{ID: "server-closes-every-n", Severity: "warn", Message: "the server closes each connection after 3 requests (Connection: close)"},
			{ID: "hidden-retries", Severity: "warn", Message: "the Transport sent 1 request(s) again"},
			{ID: "tls-not-resumed", Severity: "info", Message: "none of the 3 TLS connection(s) resumed: INFO WARN ERROR"},
		},
	}
	rep.PerConn.Min, rep.PerConn.Max, rep.PerConn.Mean = 1, 3, 2.2
	p := func(a, b, c, d time.Duration) probe.Percentiles {
		return probe.Percentiles{P50: a, P90: b, P99: c, Max: d}
	}
	small := p(120*time.Microsecond, 300*time.Microsecond, 900*time.Microsecond, ms)
	set := probe.StageSet{Count: 4, DNS: small, Connect: small, TLS: small, PoolWait: small, Write: small,
		Server: p(900*ms, 1500*ms, 12500*ms, 2*time.Minute), Transfer: small, Total: small}
	rep.Stages.New, rep.Stages.Reused = set, set
	saves := 3 * ms
	rep.Stages.ReuseSaves = &saves
	rep.Timelines = []*httptrace.Timeline{{
		ID: 1, Method: "GET", Host: "127.0.0.1:8443", Status: 200, Proto: "HTTP/1.1", Finished: true,
		Events:  []httptrace.Event{{Kind: vocab.KindGetConn}, {Kind: vocab.KindGotConn, At: ms, Conn: 1}, {Kind: vocab.KindResponse, At: 2 * ms, N: 200}, {Kind: vocab.KindDone, At: 3 * ms}},
		Conn:    httptrace.ConnInfo{ID: 1},
		Outcome: httptrace.Outcome{Class: vocab.ClassOK},
	}, {
		ID: 2, Method: "GET", Host: "127.0.0.1:8443", Finished: true,
		Events:  []httptrace.Event{{Kind: vocab.KindGetConn}, {Kind: vocab.KindDone, At: 3 * ms}},
		Outcome: httptrace.Outcome{Class: vocab.ClassReset, Stage: vocab.StageAwaitHeaders, Err: errors.New("read: connection reset by peer")},
	}}
	return rep
}

// goldenReportQuiet is a report without findings, TLS, stages or
// discovery.
func goldenReportQuiet() *probe.Result {
	rep := &probe.Result{
		Schema: "connaudit.probe/v1", Target: "http://127.0.0.1:8080/", Method: "POST",
		Requested: 3, Requests: 3, Concurrency: 1, MaxConnsPerHost: 0, Timeout: 30 * time.Second,
		Outcomes: map[httptrace.Class]int{vocab.ClassOK: 3}, Statuses: map[int]int{200: 3},
		Failures: []probe.Failure{}, Dials: 1, PerfectDials: 1, Protocols: map[string]int{"HTTP/1.1": 1},
		Connections: []probe.Connection{{ID: 1, Proto: "HTTP/1.1", Requests: 3, Responses: 3, ClosedBy: vocab.ClosedByClient, CloseReason: vocab.ReasonCloseIdle}},
		ClosedBy:    map[vocab.CloseReason]int64{vocab.ReasonCloseIdle: 1},
		Findings:    []probe.Finding{},
	}
	rep.PerConn.Min, rep.PerConn.Max, rep.PerConn.Mean = 3, 3, 3
	return rep
}

// TestProbeTextGolden: the probe's text, plain and coloured, with and
// without timelines, and its JSON are those of testdata/probe/*.golden.
// Colour marks "probe" and each severity word, nothing else.
func TestProbeTextGolden(t *testing.T) {
	t.Parallel()
	for name, rep := range map[string]*probe.Result{"full": goldenReport(), "quiet": goldenReportQuiet()} {
		for _, color := range []bool{false, true} {
			for _, verbose := range []bool{false, true} {
				file := name
				if color {
					file += "-color"
				}
				if verbose && len(rep.Timelines) > 0 {
					file += "-verbose"
				}
				var b strings.Builder
				require.NoError(t, writeProbeText(&b, rep, verbose, color))
				requireGolden(t, file+".golden", b.String())
			}
		}
		var b strings.Builder
		pf := probeFlags{asJSON: true}
		require.NoError(t, pf.write(&b, rep))
		requireGolden(t, name+".json.golden", b.String())
	}
}

// requireGolden checks got against testdata/probe/name.
func requireGolden(t *testing.T, name, got string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", "probe", name))
	require.NoError(t, err)
	require.Equal(t, string(want), got, name)
}

// TestColorProbeText: colour touches the summary's "probe" and the
// findings' severity words only, whatever the rest of the text says.
func TestColorProbeText(t *testing.T) {
	t.Parallel()
	rep := goldenReportQuiet()
	rep.Method = "WARN"
	rep.Findings = []probe.Finding{{ID: "no-keep-alive", Severity: "warn", Message: "  WARN  findings\nprobe"}}
	var plain strings.Builder
	require.NoError(t, rep.WriteText(&plain, false))
	got := colorProbeText(plain.String(), rep)
	require.Equal(t, 2, strings.Count(got, ansiReset), got)
	require.True(t, strings.HasPrefix(got, "\x1b[1mprobe\x1b[0m WARN http://127.0.0.1:8080/\n"), got)
	require.Contains(t, got, "\nfindings\n  \x1b[33mWARN\x1b[0m  no-keep-alive: WARN findings probe\n",
		"a line break in a message is a space: it cannot start a line of its own")
	// Text that is not the report's is left alone.
	require.Equal(t, "findings\n  WARN x\n", colorProbeText("findings\n  WARN x\n", &probe.Result{}))
}
