package probe_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// keepAliveThenSilentClose answers n requests per connection with
// keep-alive responses, then closes the connection without notice.
func keepAliveThenSilentClose(n int) func(*server, net.Conn) {
	return func(s *server, c net.Conn) {
		br := bufio.NewReader(c)
		for range n {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			req.Body.Close()
			s.requests.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}
}

func TestFindMaxRequests(t *testing.T) {
	t.Parallel()
	t.Run("Connection: close", func(t *testing.T) {
		t.Parallel()
		s := goServer(t, 3)
		rep := mustProbe(t, s, probe.Requests(4), probe.FindMaxRequests(50))
		require.EqualValues(t, 2, rep.Dials, "ceil(4/3)")
		m := rep.Discovery.MaxRequests
		require.NotNil(t, m)
		require.True(t, m.Found)
		require.Equal(t, 3, m.Limit)
		require.Equal(t, "connection-close", m.How)
		require.Equal(t, 3, m.Requests)
		require.EqualValues(t, 1, m.Dials)
		require.Equal(t, 3, rep.Discovery.Requests)
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		require.EqualValues(t, 4+3, s.requests.Load())
		requireFindings(t, rep, "server-closes-every-n")
		f, _ := rep.Has("server-closes-every-n")
		require.Contains(t, f.Message, "after 3 requests (Connection: close)")
	})
	t.Run("none up to the bound", func(t *testing.T) {
		t.Parallel()
		s := goServer(t, 0)
		rep := mustProbe(t, s, probe.Requests(2), probe.FindMaxRequests(30))
		m := rep.Discovery.MaxRequests
		require.False(t, m.Found)
		require.Empty(t, m.Error)
		require.Equal(t, 30, m.Requests, "bounded")
		require.EqualValues(t, 1, m.Dials)
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		require.EqualValues(t, 2+30, s.requests.Load())
		requireFindings(t, rep)
	})
	t.Run("closed without notice", func(t *testing.T) {
		t.Parallel()
		s := rawServer(t, keepAliveThenSilentClose(2))
		rep := mustProbe(t, s, probe.Requests(1), probe.FindMaxRequests(10))
		m := rep.Discovery.MaxRequests
		require.True(t, m.Found, "%+v", m)
		require.Equal(t, 2, m.Limit)
		require.NotEqual(t, "connection-close", m.How)
		require.Equal(t, 3, m.Requests, "the third request shows the connection gone")
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		requireFindings(t, rep, "server-closes-every-n")
		f, _ := rep.Has("server-closes-every-n")
		require.Contains(t, f.Message, "without notice")
	})
	t.Run("no keep-alive", func(t *testing.T) {
		t.Parallel()
		s := rawServer(t, http10)
		rep := mustProbe(t, s, probe.Requests(1), probe.FindMaxRequests(10), probe.FindIdleTimeout(time.Second))
		m := rep.Discovery.MaxRequests
		require.True(t, m.Found)
		require.Equal(t, 1, m.Limit)
		require.Equal(t, "http1.0-no-keep-alive", m.How)
		idle := rep.Discovery.IdleTimeout
		require.False(t, idle.Found)
		require.Contains(t, idle.Error, "after each response")
		require.Equal(t, 1, idle.Requests)
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		requireFindings(t, rep, "no-keep-alive")
	})
	t.Run("one request without notice", func(t *testing.T) {
		t.Parallel()
		// The main run's one request leaves its connection idle, and the
		// probe closes it: only discovery shows the server drops the
		// second request of each connection.
		s := rawServer(t, answerThenDropNext(1))
		rep := mustProbe(t, s, probe.Requests(1), probe.FindMaxRequests(10))
		require.EqualValues(t, "client", rep.Connections[0].ClosedBy)
		m := rep.Discovery.MaxRequests
		require.True(t, m.Found, "%+v", m)
		require.Equal(t, 1, m.Limit)
		require.True(t, m.HiddenRetry)
		requireFindings(t, rep, "no-keep-alive")
		f, _ := rep.Has("no-keep-alive")
		require.Equal(t, "the server closed the connection after its first response (closed during a request)", f.Message)
	})
}

func TestFindIdleTimeout(t *testing.T) {
	t.Parallel()
	t.Run("found", func(t *testing.T) {
		t.Parallel()
		const serverIdle = 300 * time.Millisecond
		s := goServer(t, 0, withIdleTimeout(serverIdle))
		rep := mustProbe(t, s, probe.Requests(2), probe.FindIdleTimeout(time.Second))
		idle := rep.Discovery.IdleTimeout
		require.NotNil(t, idle)
		require.True(t, idle.Found, "%+v", idle)
		require.True(t, idle.Complete, "%+v", idle)
		require.Empty(t, idle.Error)
		// The bracket is ordered, within the bound and as narrow as the
		// search's resolution. Where it falls around 300ms depends on
		// scheduling (the server arms its idle timer after it flushed the
		// response, the probe after it read it): not asserted.
		require.Less(t, idle.Survived, idle.Closed)
		require.LessOrEqual(t, idle.Closed, time.Second)
		require.LessOrEqual(t, idle.Closed-idle.Survived, max(50*time.Millisecond, idle.Survived/10))
		require.Equal(t, 2*idle.Trials, idle.Requests)
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		requireFindings(t, rep, "server-idle-shorter-than-client")
	})
	t.Run("survives every gap", func(t *testing.T) {
		t.Parallel()
		s := goServer(t, 0)
		rep := mustProbe(t, s, probe.Requests(1), probe.FindIdleTimeout(200*time.Millisecond))
		idle := rep.Discovery.IdleTimeout
		require.False(t, idle.Found)
		require.True(t, idle.Complete)
		require.Equal(t, 200*time.Millisecond, idle.Survived)
		require.Equal(t, 2, idle.Trials, "100ms, 200ms")
		require.EqualValues(t, 2, idle.Dials, "a fresh connection per trial")
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		requireFindings(t, rep)
	})
	t.Run("bounded by the deadline", func(t *testing.T) {
		t.Parallel()
		s := goServer(t, 0)
		req, err := http.NewRequest(http.MethodGet, s.URL, nil)
		require.NoError(t, err)
		rep, err := probe.Run(t.Context(), req, probe.Requests(1), probe.FindIdleTimeout(time.Minute),
			probe.Deadline(500*time.Millisecond))
		require.NoError(t, err)
		idle := rep.Discovery.IdleTimeout
		require.False(t, idle.Complete)
		require.Contains(t, idle.Error, "deadline")
		require.True(t, rep.DeadlineReached)
		require.False(t, rep.Interrupted)
		requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
		requireFindings(t, rep, "deadline-reached")
	})
}
