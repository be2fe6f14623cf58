package probe_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hostile"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// hostileServer starts a hostile server answering every connection with
// reply.
func hostileServer(t *testing.T, reply hostile.Reply) *server {
	t.Helper()
	h, err := hostile.New(reply)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return &server{URL: h.URL()}
}

// endlessBody answers each request with a chunked body that never ends:
// chunks of 4 KiB until a write fails (the client closed the connection)
// or 64 MiB were written.
func endlessBody(_ *server, c net.Conn) {
	if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		return
	}
	chunk := "1000\r\n" + strings.Repeat("x", 0x1000) + "\r\n"
	for range 64 << 20 / 0x1000 {
		if _, err := io.WriteString(c, chunk); err != nil {
			return
		}
	}
}

// tricklingBody answers each request with a body of 1 MB, of which it
// writes a byte every 20ms: it does not end within a short timeout.
func tricklingBody(_ *server, c net.Conn) {
	if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"); err != nil {
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range 1000 {
		if _, err := io.WriteString(c, "x"); err != nil {
			return
		}
		<-tick.C
	}
}

// TestBodiesThatDoNotEnd: a response whose body does not end within the
// probe's bounds (its Timeout, or MaxBody), or ends before its declared
// length, is a failed request of the tracer's class, and request-errors
// says what fixes it: the probe agrees with trace, which fails each.
func TestBodiesThatDoNotEnd(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	cases := []struct {
		name  string
		srv   func(t *testing.T) *server
		opts  []probe.Option
		class httptrace.Class
		fix   string
	}{
		{"Content-Length never reached", func(t *testing.T) *server {
			return hostileServer(t, hostile.Reply{Name: "stalled-body",
				Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly sixteen byt"), End: hostile.EndStall})
		}, nil, vocab.ClassDeadline, "the body of 2 response(s) did not end within the 300ms Timeout"},
		{"chunked never terminated", func(t *testing.T) *server {
			return hostileServer(t, hostile.Reply{Name: "unterminated-chunked",
				Raw: []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), End: hostile.EndStall})
		}, nil, vocab.ClassDeadline, "the body of 2 response(s) did not end within the 300ms Timeout"},
		{"trickles", func(t *testing.T) *server { return rawServer(t, tricklingBody) },
			nil, vocab.ClassDeadline, "the body of 2 response(s) did not end within the 300ms Timeout"},
		{"never ends", func(t *testing.T) *server { return rawServer(t, endlessBody) },
			[]probe.Option{probe.MaxBody(64 << 10)}, vocab.ClassError,
			"the body of 2 response(s) went on past MaxBody (65536 bytes), where the probe stopped reading"},
		{"ends before its length", func(t *testing.T) *server {
			return hostileServer(t, hostile.Reply{Name: "short-body",
				Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly sixteen byt")})
		}, nil, vocab.ClassBodyTruncated, "the body of 2 response(s) ended before its declared length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := runProbe(t, tc.srv(t), append([]probe.Option{probe.Requests(2), probe.Timeout(timeout)}, tc.opts...)...)
			var unusable *probe.UnusableError
			require.ErrorAs(t, err, &unusable, "no request succeeded")
			require.Equal(t, vocab.StageBody, unusable.Stage)
			require.Equal(t, map[httptrace.Class]int{tc.class: 2}, rep.Outcomes)
			require.Len(t, rep.Failures, 1)
			require.Equal(t, vocab.StageBody, rep.Failures[0].Stage)
			require.Zero(t, rep.Cut, "the deadline cut nothing")
			requireFindings(t, rep, "request-errors")
			f, _ := rep.Has("request-errors")
			require.Contains(t, f.Message, tc.fix)
		})
	}
}

// TestSomeBodiesDoNotEnd: when some responses' bodies stall, the others
// succeed and the probe fails on its finding, not as an unusable target.
func TestSomeBodiesDoNotEnd(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "only sixteen byt")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})))
	rep := mustProbe(t, s, probe.Requests(3), probe.Timeout(time.Second))
	require.Equal(t, map[httptrace.Class]int{vocab.ClassOK: 2, vocab.ClassDeadline: 1}, rep.Outcomes)
	require.Equal(t, map[int]int{http.StatusOK: 2}, rep.Statuses)
	requireFindings(t, rep, "request-errors")
	f, _ := rep.Has("request-errors")
	require.Equal(t, "1 of 3 requests failed: deadline @body ×1; first: probe: request timeout reached; "+
		"the body of 1 response(s) did not end within the 1s Timeout: the server sent it too slowly or never finished it "+
		"(a Content-Length it does not reach, a chunked body without its last chunk); raise Timeout if the bodies are that slow, "+
		"else fix the server", f.Message)
	require.True(t, rep.Fails("error"))
}
