package httptrace_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// TestWaterfallWithoutConnection: a request that got no connection (the
// dial was refused, the TLS handshake failed) says so, rather than
// calling the connection reused or printing a TLS version of zero.
func TestWaterfallWithoutConnection(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedURL := "http://" + refused.Addr().String() + "/"
	refused.Close()
	untrusted := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), false)
	ok := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))

	tr, c := traced(t, newBase(t, nil), nil)
	for _, u := range []string{refusedURL, untrusted.URL, ok.URL} {
		resp, err := tr.RoundTrip(newRequest(t, guardCtx(t), http.MethodGet, u, nil))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	tls := waitTimelines(t, c, 3)
	waterfall := func(tl *httptrace.Timeline) string {
		var b strings.Builder
		require.NoError(t, tl.WriteText(&b, true))
		return b.String()
	}
	refusedWF, tlsWF, okWF := waterfall(tls[0]), waterfall(tls[1]), waterfall(tls[2])
	require.Equal(t, vocab.ClassConnectRefused, tls[0].Outcome.Class)
	require.Contains(t, refusedWF, "connection  none: the request got no connection")
	require.NotContains(t, refusedWF, "reused")

	require.Equal(t, vocab.ClassTLS, tls[1].Outcome.Class)
	require.Contains(t, tlsWF, "tls         handshake failed")
	require.NotContains(t, tlsWF, "0x0000")

	require.Equal(t, vocab.ClassOK, tls[2].Outcome.Class)
	require.Contains(t, okWF, " new ")

	// A stage of no length (a refused connect has no TLS, write or
	// server stage) has no bar, and no line ends in spaces.
	for _, wf := range []string{refusedWF, tlsWF, okWF} {
		for _, l := range strings.Split(wf, "\n") {
			require.Equal(t, strings.TrimRight(l, " "), l, "trailing spaces in:\n%s", wf)
		}
	}
}

// TestWaterfallLongTimesAlign: stages of minutes and events hours into the
// request keep every time right-aligned in one column, the stages' and the
// events' alike, each in milliseconds.
func TestWaterfallLongTimesAlign(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	tl := &httptrace.Timeline{
		Method: http.MethodGet, Status: 200, Proto: "HTTP/1.1", BodyBytes: 2, Finished: true,
		Outcome: httptrace.Outcome{Class: vocab.ClassOK, Status: 200},
		Events: []httptrace.Event{
			{Kind: vocab.KindGetConn, At: ms(0.012)},
			{Kind: vocab.KindGotConn, At: ms(0.5)},
			{Kind: vocab.KindWroteRequest, At: ms(0.75)},
			{Kind: vocab.KindFirstByte, At: 150 * time.Second},
			{Kind: vocab.KindResponse, At: 150*time.Second + ms(0.2), N: 200},
			{Kind: vocab.KindBodyEOF, At: 2*time.Hour + 3*time.Minute, N: 2},
			{Kind: vocab.KindBodyClose, At: 2*time.Hour + 3*time.Minute + ms(1), N: 2},
			{Kind: vocab.KindDone, At: 2*time.Hour + 3*time.Minute + ms(1), N: 200},
		},
	}
	var b strings.Builder
	require.NoError(t, tl.WriteText(&b, true))
	out := b.String()
	// end returns the column just past a line's time: the "ms" that ends
	// its first field of digits.
	end := func(l string) int {
		i := strings.Index(l, "ms")
		require.Positive(t, i, l)
		return i + len("ms")
	}
	var stageEnds, eventEnds []int
	inEvents := false
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch {
		case l == "  events":
			inEvents = true
		case inEvents:
			eventEnds = append(eventEnds, end(l))
		case strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "  connection") && !strings.HasPrefix(l, "  response") && !strings.HasPrefix(l, "  outcome"):
			stageEnds = append(stageEnds, end(l))
		}
	}
	require.Len(t, stageEnds, 8, out) // seven stages and the total
	require.Len(t, eventEnds, len(tl.Events), out)
	for _, e := range stageEnds {
		require.Equal(t, stageEnds[0], e, "stage times aligned:\n%s", out)
	}
	for _, e := range eventEnds {
		require.Equal(t, eventEnds[0], e, "event times aligned:\n%s", out)
	}
	for _, want := range []string{
		"  server      149999.250ms  #\n",
		"  transfer   7230000.000ms  ####", // 2h3m less the first byte at 150s
		"  total      7380001.000ms\n",
		"  dns              0.000ms",
		"\n          0.012ms  get-conn\n",
		"\n     150000.000ms  first-byte\n",
		"\n    7380001.000ms  done n=200\n",
	} {
		require.Contains(t, out, want)
	}
}
