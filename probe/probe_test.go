package probe_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// requireConns checks that every connection carried and answered n
// requests and was closed by and for the given side and reason.
func requireConns(t *testing.T, rep *probe.Result, n int, by pool.Closer, reason pool.CloseReason) {
	t.Helper()
	require.NotEmpty(t, rep.Connections)
	for _, c := range rep.Connections {
		require.Equal(t, n, c.Requests, "connection %+v", c)
		require.Equal(t, n, c.Responses, "connection %+v", c)
		require.Equal(t, by, c.ClosedBy, "connection %+v", c)
		require.Equal(t, reason, c.CloseReason, "connection %+v", c)
	}
}

func TestKeepAliveServer(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	rep := mustProbe(t, s, probe.Requests(20))
	require.Equal(t, 20, rep.Requests)
	require.Equal(t, map[httptrace.Class]int{vocab.ClassOK: 20}, rep.Outcomes)
	require.Equal(t, map[int]int{200: 20}, rep.Statuses)
	require.EqualValues(t, 1, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 20, s.requests.Load())
	require.Equal(t, 1, rep.PerfectDials)
	requireEveryConnAnswered(t, rep, 20)
	// The one connection is closed by the probe at the end.
	requireConns(t, rep, 20, vocab.ClosedByClient, vocab.ReasonCloseIdle)
	require.Equal(t, map[string]int{"HTTP/1.1": 1}, rep.Protocols)
	require.Nil(t, rep.TLS)
	require.Equal(t, 1, rep.Stages.New.Count)
	require.Equal(t, 19, rep.Stages.Reused.Count)
	require.NotNil(t, rep.Stages.ReuseSaves)
	require.Zero(t, rep.HiddenRetries)
	requireFindings(t, rep)
}

func TestConcurrencyWithinCap(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	rep := mustProbe(t, s, probe.Requests(40), probe.Concurrency(4), probe.MaxConnsPerHost(4))
	require.Equal(t, 40, rep.Requests)
	require.Equal(t, 40, rep.Outcomes[vocab.ClassOK])
	require.Equal(t, 4, rep.PerfectDials)
	requireAcceptedDials(t, s, rep, 0)
	require.LessOrEqual(t, rep.Dials, int64(4), "never more connections than the cap")
	require.EqualValues(t, 40, s.requests.Load(), "never more requests than asked")
	requireFindings(t, rep)
}

func TestServerClosesEveryN(t *testing.T) {
	t.Parallel()
	s := goServer(t, 5)
	rep := mustProbe(t, s, probe.Requests(20))
	require.Equal(t, 20, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 4, rep.Dials, "ceil(20/5)")
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.Equal(t, 1, rep.PerfectDials)
	requireConns(t, rep, 5, vocab.ClosedByServer, vocab.ReasonConnectionClose)
	require.EqualValues(t, 4, rep.ClosedBy[vocab.ReasonConnectionClose])
	requireFindings(t, rep, "server-closes-every-n")
	f, _ := rep.Has("server-closes-every-n")
	require.EqualValues(t, "warn", f.Severity)
	require.Contains(t, f.Message, "after 5 requests")
}

func TestNoKeepAliveConnectionClose(t *testing.T) {
	t.Parallel()
	s := goServer(t, 1)
	rep := mustProbe(t, s, probe.Requests(6))
	require.Equal(t, 6, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 6, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	requireConns(t, rep, 1, vocab.ClosedByServer, vocab.ReasonConnectionClose)
	requireFindings(t, rep, "no-keep-alive")
	f, _ := rep.Has("no-keep-alive")
	require.Contains(t, f.Message, "Connection: close")
}

func TestNoKeepAliveHTTP10(t *testing.T) {
	t.Parallel()
	s := rawServer(t, http10)
	rep := mustProbe(t, s, probe.Requests(5))
	require.Equal(t, 5, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 5, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.Equal(t, map[string]int{"HTTP/1.0": 5}, rep.Protocols)
	requireConns(t, rep, 1, vocab.ClosedByServer, vocab.ReasonHTTP10)
	requireFindings(t, rep, "no-keep-alive")
	f, _ := rep.Has("no-keep-alive")
	require.Contains(t, f.Message, "HTTP/1.0 without keep-alive")
}

func TestServerIdleTimeoutShorterThanGap(t *testing.T) {
	t.Parallel()
	// The server closes a connection idle for 50ms; the probe pauses a
	// second between requests, so each request finds its connection gone.
	// (The margin is for the client to read the server's close before it
	// reuses the connection: under load, a shorter one lets a request meet
	// the closing connection, the stale-connection race, which ends it
	// otherwise.)
	s := goServer(t, 0, withIdleTimeout(50*time.Millisecond))
	rep := mustProbe(t, s, probe.Requests(3), probe.Gap(time.Second))
	require.Equal(t, 3, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 3, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 3, s.requests.Load())
	// The last connection is closed by the probe or, if the server was
	// quicker, by the server while idle; the others by the server.
	for _, c := range rep.Connections[:2] {
		require.Equal(t, vocab.ClosedByServer, c.ClosedBy, "%+v", c)
		require.Equal(t, vocab.ReasonServerClosedIdle, c.CloseReason, "%+v", c)
	}
	requireFindings(t, rep, "server-idle-shorter-than-client")
}

func TestServerIdleTimeoutLongerThanGap(t *testing.T) {
	t.Parallel()
	// The same server idle timeout, but the client's is shorter than the
	// gap: the client closes first, so nothing is wrong with the server.
	s := goServer(t, 0, withIdleTimeout(10*time.Second))
	rep := mustProbe(t, s, probe.Requests(3), probe.Gap(100*time.Millisecond), probe.IdleConnTimeout(20*time.Millisecond))
	require.EqualValues(t, 3, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 2, rep.ClosedBy[vocab.ReasonIdleTimeout], "closed by the client's idle timeout")
	requireFindings(t, rep)
}

func TestHTTP2(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0, withH2)
	rep := mustProbe(t, s, probe.Requests(10), probe.Concurrency(2))
	require.Equal(t, 10, rep.Outcomes[vocab.ClassOK])
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.Equal(t, 1, rep.PerfectDials, "one connection in all over HTTP/2")
	// Two requests that start together may each dial before either
	// connection is known to speak HTTP/2 (MaxConnsPerHost does not cap
	// HTTP/2 connections).
	require.Equal(t, map[string]int{"h2": int(rep.Dials)}, rep.Protocols)
	require.NotNil(t, rep.TLS)
	require.Equal(t, "h2", rep.TLS.ALPN)
	require.Equal(t, int(rep.Dials), rep.TLS.Versions["TLS 1.3"])
	dropRacedResumption(t, rep)
	requireFindings(t, rep)
}

func TestH2NotOffered(t *testing.T) {
	t.Parallel()
	// TLS with ALPN http/1.1 only; closing every 2nd response makes new
	// connections, which resume the first one's TLS session.
	s := goServer(t, 2, withTLS)
	rep := mustProbe(t, s, probe.Requests(6))
	require.Equal(t, 6, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 3, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.Equal(t, map[string]int{"HTTP/1.1": 3}, rep.Protocols)
	require.NotNil(t, rep.TLS)
	require.Equal(t, "http/1.1", rep.TLS.ALPN)
	require.Equal(t, 3, rep.TLS.Connections)
	require.Equal(t, 2, rep.TLS.Resumable)
	require.Equal(t, 2, rep.TLS.Resumed, "a Go server resumes TLS 1.3 sessions")
	requireFindings(t, rep, "h2-not-offered", "server-closes-every-n")
	f, _ := rep.Has("h2-not-offered")
	require.EqualValues(t, "info", f.Severity)

	t.Run("required", func(t *testing.T) {
		rep := mustProbe(t, s, probe.Requests(1), probe.Protocols(protocols(false, true)))
		f, ok := rep.Has("h2-not-offered")
		require.True(t, ok)
		require.EqualValues(t, "error", f.Severity)
		require.True(t, rep.Fails("error"))
	})
	t.Run("HTTP/1 only", func(t *testing.T) {
		rep := mustProbe(t, s, probe.Requests(1), probe.Protocols(protocols(true, false)))
		requireFindings(t, rep)
	})
	t.Run("no session cache", func(t *testing.T) {
		// A server that issues no session tickets cannot resume.
		s := goServer(t, 1, func(hs *httptest.Server) { hs.TLS = &tls.Config{SessionTicketsDisabled: true} })
		rep := mustProbe(t, s, probe.Requests(3))
		require.Zero(t, rep.TLS.Resumed)
		requireFindings(t, rep, "h2-not-offered", "no-keep-alive", "tls-not-resumed")
	})
}

func TestHiddenRetries(t *testing.T) {
	t.Parallel()
	// Each connection answers one request and drops the next: the
	// Transport sends that one again on a new connection by itself.
	s := rawServer(t, closeAfterReadingSecond)
	rep := mustProbe(t, s, probe.Requests(4))
	require.Equal(t, 4, rep.Requests)
	require.Equal(t, 4, rep.Outcomes[vocab.ClassOK], "the caller sees no failure")
	require.Equal(t, 3, rep.HiddenRetries)
	require.Equal(t, 3, rep.ExtraAttempts)
	require.EqualValues(t, 4, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 7, s.requests.Load(), "the server saw the retried requests twice")
	// No connection answered two: the last, which the probe's end
	// closed, says nothing either way.
	requireFindings(t, rep, "no-keep-alive", "hidden-retries")
	// The finding says what is known: the requests were sent again after
	// their first connection failed, not that the server processed them.
	f, _ := rep.Has("hidden-retries")
	require.Contains(t, f.Message, "sent 3 request(s) again on another connection")
	require.Contains(t, f.Message, "the server may have processed the first attempt")
	// The server read each request before it closed: nothing says it did
	// not process them.
	require.Equal(t, 3, rep.HiddenRetriesPossiblyProcessed)
	require.Zero(t, rep.HiddenRetriesNotProcessed, "%v", rep.HiddenRetriesWhy)
	require.NotContains(t, f.Message, "the server saw")
	// Each request counts on the connection that answered it.
	requireEveryConnAnswered(t, rep, 1)
	for i, c := range rep.Connections {
		require.Equal(t, 1, c.Responses, "%+v", c)
		if i < 3 {
			require.Equal(t, 2, c.Requests, "the retried attempt came here first: %+v", c)
		}
	}
}

// TestHiddenRetriesPerConnection probes a server that answers 5 requests
// per connection, then reads the 6th and closes without a word: the
// Transport sends the 6th again on a new connection. Each connection
// answered exactly 5 requests, which the report says though the retried
// requests were sent on two connections.
func TestHiddenRetriesPerConnection(t *testing.T) {
	t.Parallel()
	s := rawServer(t, answerThenDropNext(5))
	rep := mustProbe(t, s, probe.Requests(20))
	require.Equal(t, 20, rep.Outcomes[vocab.ClassOK])
	require.Equal(t, 3, rep.HiddenRetries)
	require.EqualValues(t, 4, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 23, s.requests.Load(), "the server read the dropped requests too")
	requireEveryConnAnswered(t, rep, 5)
	answered := 0
	for i, c := range rep.Connections {
		require.Equal(t, 5, c.Responses, "%+v", c)
		answered += c.Responses
		if i < 3 {
			require.Equal(t, 6, c.Requests, "%+v", c)
			require.Equal(t, vocab.ClosedByServer, c.ClosedBy, "%+v", c)
		}
	}
	require.Equal(t, rep.Requests, answered, "each request counts on one connection")
	requireFindings(t, rep, "server-closes-every-n", "hidden-retries")
	f, _ := rep.Has("server-closes-every-n")
	require.Contains(t, f.Message, "closed 3 connection(s) after 5 requests each")
	require.Contains(t, f.Message, "without notice")
}

// TestServerClosesEveryNSilently probes a server that closes each
// connection right after its 5th response, without notice: the every-N
// pattern, not an idle timeout.
func TestServerClosesEveryNSilently(t *testing.T) {
	t.Parallel()
	s := rawServer(t, keepAliveThenSilentClose(5))
	rep := mustProbe(t, s, probe.Requests(20))
	require.Equal(t, 20, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 4, rep.Dials, "%+v", rep.Connections)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
	require.EqualValues(t, 20, s.requests.Load())
	requireEveryConnAnswered(t, rep, 5)
	// Whether the Transport notices a close before it sends the next
	// request on the connection is a race: it may send it and retry it.
	for _, f := range rep.Findings {
		require.Contains(t, []string{"server-closes-every-n", "hidden-retries"}, f.ID, "%+v", rep.Findings)
	}
	f, ok := rep.Has("server-closes-every-n")
	require.True(t, ok, "%+v", rep.Findings)
	require.Contains(t, f.Message, "after 5 requests each")
	require.Contains(t, f.Message, "without notice")
}

// TestErrorResponses probes a server that answers every request with 431
// and Connection: close: that is no keep-alive limit, and the report says
// that every response was an error instead.
func TestErrorResponses(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	s := errorServer(t, http.StatusRequestHeaderFieldsTooLarge, &requests)
	rep := mustProbe(t, s, probe.Requests(3), probe.FindMaxRequests(10))
	require.Equal(t, map[int]int{431: 3}, rep.Statuses)
	require.EqualValues(t, 3, rep.Dials)
	requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
	require.EqualValues(t, 4, requests.Load())
	for _, c := range rep.Connections {
		require.Equal(t, 431, c.CloseStatus, "%+v", c)
		require.Equal(t, vocab.ReasonConnectionClose, c.CloseReason, "%+v", c)
	}
	m := rep.Discovery.MaxRequests
	require.False(t, m.Found, "%+v", m)
	require.Equal(t, 1, m.Requests)
	require.Equal(t, 1, m.ErrorResponses)
	require.Contains(t, m.Error, "431")
	requireFindings(t, rep, "error-responses")
	f, _ := rep.Has("error-responses")
	require.EqualValues(t, "warn", f.Severity)
	require.Contains(t, f.Message, "every response was an error (431 ×3)")
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text, false))
	require.NotContains(t, text.String(), "1 (Connection: close)")
	require.Contains(t, text.String(), "closed by server: connection-close on a 431 response")

	t.Run("some errors", func(t *testing.T) {
		// A server that closes after its errors but keeps the
		// connection after a success: no finding about keep-alive.
		var n atomic.Int64
		s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if n.Add(1)%2 == 0 {
				w.Header().Set("Connection", "close")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
		})))
		rep := mustProbe(t, s, probe.Requests(6))
		require.Equal(t, map[int]int{200: 3, 503: 3}, rep.Statuses)
		require.EqualValues(t, 3, rep.Dials)
		requireAccepted(t, s, rep.Dials)
		requireFindings(t, rep)
	})
}

// TestReuseSavesTheSetup: what reuse saves is the setup a new connection
// costs (DNS, connect, TLS), not the difference in totals, which counts a
// server slow to give its first response (nginx warming up) as a cost of
// the new connection.
func TestReuseSavesTheSetup(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 1 {
			// A fault, not a wait for a state: the first response is slow.
			time.Sleep(200 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	})))
	rep := mustProbe(t, s, probe.Requests(4))
	st := rep.Stages
	require.Equal(t, 1, st.New.Count)
	require.Equal(t, 3, st.Reused.Count)
	require.NotNil(t, st.ReuseSaves)
	setup := st.New.DNS.Max + st.New.Connect.Max + st.New.TLS.Max // exact: one new connection
	require.GreaterOrEqual(t, *st.ReuseSaves, time.Duration(0))
	require.LessOrEqual(t, *st.ReuseSaves, setup+setup/100, "within the histogram's 1%% of the setup")
	require.Less(t, *st.ReuseSaves, st.New.Total.P50-st.Reused.Total.P50, "the slow first response is not counted")
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text, false))
	require.Contains(t, text.String(), "per request (median of dns, connect and tls on a new connection)")
}

func TestSlowNewConnection(t *testing.T) {
	t.Parallel()
	// The server accepts one connection, serves two requests on it and
	// closes it; by then its accept queue is full, so the next dial hangs
	// until the request's timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	setBacklog0(t, ln)
	var (
		mu       sync.Mutex
		filler   net.Conn
		accepted atomic.Int64
		served   atomic.Int64
	)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err == nil {
				mu.Lock()
				filler = c
				mu.Unlock()
			}
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	hs.Listener.Close()
	hs.Listener = &oneShotListener{Listener: ln, closed: make(chan struct{})}
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		mu.Lock()
		defer mu.Unlock()
		if filler != nil {
			filler.Close()
		}
	})
	rep := mustProbe(t, &server{URL: hs.URL}, probe.Requests(3), probe.Timeout(300*time.Millisecond))
	require.Equal(t, 2, rep.Outcomes[vocab.ClassOK])
	require.Equal(t, 1, rep.Requests-rep.Outcomes[vocab.ClassOK])
	require.Equal(t, accepted.Load(), rep.Dials-rep.DialErrors, "connected dials = server accepts")
	require.EqualValues(t, 1, accepted.Load())
	// The server also closed its one connection after 2 requests.
	requireFindings(t, rep, "slow-new-connection", "request-errors", "server-closes-every-n")
	f, _ := rep.Has("request-errors")
	require.EqualValues(t, "error", f.Severity)
	require.Contains(t, f.Message, "@connect")
}

// TestSlowConnectionSetup: a TLS handshake the server holds for more than
// half the request timeout (but less than all of it) is a slow new
// connection, though every request succeeds.
func TestSlowConnectionSetup(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second // wide: the margin above the hold is a scheduling margin
	s := goServer(t, 0, func(hs *httptest.Server) {
		hs.EnableHTTP2 = true
		hs.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			// A fault, not a wait for a state: the handshake takes this
			// long, at least.
			time.Sleep(timeout/2 + 50*time.Millisecond)
			return nil, nil
		}}
	})
	rep := mustProbe(t, s, probe.Requests(2), probe.Timeout(timeout))
	require.Equal(t, 2, rep.Outcomes[vocab.ClassOK])
	requireFindings(t, rep, "slow-new-connection")
	f, _ := rep.Has("slow-new-connection")
	require.Contains(t, f.Message, "1 connection setup(s) took more than half of it")
	require.NotContains(t, f.Message, "ran out of")
}

func TestNeverMoreRequestsThanAsked(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})))
	rep := mustProbe(t, s, probe.Requests(7), probe.Concurrency(3), probe.MaxConnsPerHost(0))
	require.Equal(t, 7, rep.Requests)
	// Without a cap the Transport may dial more than one connection per
	// worker: a dial started for a request that then got an idle
	// connection goes on, and its connection joins the pool, unless the
	// probe's closing of its idle connections at the end cancels it
	// first: an abandoned dial, not a failed one.
	requireAcceptedDials(t, s, rep, 0)
	require.Equal(t, map[int]int{http.StatusFound: 7}, rep.Statuses, "redirects are not followed")
	require.EqualValues(t, 7, seen.Load())
	require.Equal(t, 3, rep.PerfectDials, "no cap: one connection per worker")
}

// TestBodyOverMaxBody: a body that goes on past MaxBody did not end within
// the probe's bounds: its request failed (class "error" at the body
// stage), as trace -max-body fails, and request-errors says what fixes
// it; the probe closed the body, which closed its connection. A body of
// exactly MaxBody bytes is whole, and its connection kept.
func TestBodyOverMaxBody(t *testing.T) {
	t.Parallel()
	hello := func() *server {
		return startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "hello")
		})))
	}
	s := hello()
	rep, err := runProbe(t, s, probe.Requests(3), probe.MaxBody(3))
	var unusable *probe.UnusableError
	require.ErrorAs(t, err, &unusable, "no request succeeded")
	require.Equal(t, map[httptrace.Class]int{vocab.ClassError: 3}, rep.Outcomes)
	require.Equal(t, []probe.Failure{{Class: vocab.ClassError, Stage: vocab.StageBody,
		Error: "probe: the body went on past MaxBody (3 bytes): closed there, before its end", Count: 3}}, rep.Failures)
	require.EqualValues(t, 3, rep.Dials, "a body closed early closes its connection")
	requireAccepted(t, s, rep.Dials)
	requireConns(t, rep, 1, vocab.ClosedByClient, vocab.ReasonEarlyBodyClose)
	requireFindings(t, rep, "request-errors")
	f, _ := rep.Has("request-errors")
	require.Contains(t, f.Message, "the body of 3 response(s) went on past MaxBody (3 bytes), where the probe stopped reading: raise MaxBody")
	require.Zero(t, rep.Cut)
	require.Zero(t, rep.Stages.New.Count+rep.Stages.Reused.Count, "no successful request")

	whole := hello()
	rep = mustProbe(t, whole, probe.Requests(3), probe.MaxBody(5))
	require.Equal(t, map[httptrace.Class]int{vocab.ClassOK: 3}, rep.Outcomes)
	require.EqualValues(t, 1, rep.Dials, "a body read to its end keeps its connection")
	requireFindings(t, rep)
}

func TestUnusableTarget(t *testing.T) {
	t.Parallel()
	closed := "http://" + testserver.ClosedPort(t)

	cases := []struct {
		name  string
		srv   *server
		opts  []probe.Option
		class httptrace.Class
		also  []string
	}{
		{"refused", &server{URL: closed}, nil, vocab.ClassConnectRefused, nil},
		{"connect hangs", &server{URL: "http://" + fullBacklog(t)}, []probe.Option{probe.Timeout(200 * time.Millisecond)},
			vocab.ClassDeadline, []string{"slow-new-connection"}},
		{"garbage", rawServer(t, garbage), nil, vocab.ClassProtocol, nil},
		// Whether the banner arrives before or after the request is
		// written decides the class: any failure will do.
		{"banner", rawServer(t, banner), nil, "", nil},
		{"untrusted certificate", goServer(t, 0, withTLS), nil, vocab.ClassTLS, nil},
		// A server that never answers: its slowness is not the new
		// connection's, so no slow-new-connection.
		{"never answers", neverAnswers(t), []probe.Option{probe.Timeout(100 * time.Millisecond)}, vocab.ClassDeadline, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The server's certificate is not trusted here.
			rep, err := runProbe(t, &server{URL: tc.srv.URL}, append([]probe.Option{probe.Requests(2)}, tc.opts...)...)
			var ue *probe.UnusableError
			require.ErrorAs(t, err, &ue)
			require.NotNil(t, rep, "the report comes with the error")
			switch tc.class {
			case "":
				require.NotEqual(t, vocab.ClassOK, ue.Class)
			case vocab.ClassDeadline:
				// The request's timeout and the dial's (the same) race.
				require.Contains(t, []httptrace.Class{vocab.ClassDeadline, vocab.ClassConnectTimeout}, ue.Class, "%v", err)
			default:
				require.Equal(t, tc.class, ue.Class, "%v", err)
			}
			require.Equal(t, 2, ue.Sent)
			require.NotContains(t, err.Error(), "\n")
			requireAccepted(t, tc.srv, rep.Dials-rep.DialErrors, "connected dials = server accepts")
			requireFindings(t, rep, append(tc.also, "request-errors")...)
		})
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	// Two quick responses, then a handler that waits for the client to
	// go away: the probe's deadline ends the third request.
	var served atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) > 2 {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, "ok")
	})))
	req, err := http.NewRequest(http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	rep, err := probe.Run(t.Context(), req, probe.Requests(10), probe.Deadline(300*time.Millisecond), probe.FindMaxRequests(5))
	require.NoError(t, err)
	require.True(t, rep.DeadlineReached)
	require.Equal(t, 3, rep.Requests, "requests not started by the deadline are not sent")
	require.Equal(t, 1, rep.Cut)
	require.Equal(t, 2, rep.Outcomes[vocab.ClassOK])
	require.Equal(t, 1, rep.Outcomes[vocab.ClassDeadline])
	require.Zero(t, rep.Discovery.Requests, "no discovery after the deadline")
	require.EqualValues(t, 1, rep.Dials)
	requireAccepted(t, s, rep.Dials+rep.Discovery.Dials, "probe dials = server accepts")
	requireFindings(t, rep, "deadline-reached")

	t.Run("nothing answered", func(t *testing.T) {
		rep, err := probe.Run(t.Context(), req, probe.Requests(2), probe.Deadline(200*time.Millisecond))
		var ue *probe.UnusableError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, vocab.ClassDeadline, ue.Class)
		require.True(t, rep.DeadlineReached)
	})
}

func TestRedaction(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	secretURL := strings.Replace(s.URL, "://", "://alice:hunter2@", 1) + "/path?token=s3cr3t-value"
	req, err := http.NewRequest(http.MethodGet, secretURL, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer s3cr3t-bearer")
	req.Header.Set("Cookie", "session=s3cr3t-cookie")
	rep, err := probe.Run(t.Context(), req, probe.Requests(2), probe.KeepTimelines(), probe.Deadline(guard))
	require.NoError(t, err)
	var text, js strings.Builder
	require.NoError(t, rep.WriteText(&text, true))
	require.NoError(t, rep.WriteJSON(&js))
	for _, out := range []string{text.String(), js.String()} {
		for _, secret := range []string{"hunter2", "alice", "s3cr3t"} {
			require.NotContains(t, out, secret)
		}
		require.Contains(t, out, "token="+redact.Masked)
	}

	// Errors too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	req, err = http.NewRequest(http.MethodGet, "http://alice:hunter2@"+addr+"/?token=s3cr3t-value", nil)
	require.NoError(t, err)
	rep, err = probe.Run(t.Context(), req, probe.Requests(1), probe.Deadline(guard))
	require.Error(t, err)
	text.Reset()
	require.NoError(t, rep.WriteText(&text, false))
	for _, out := range []string{err.Error(), text.String()} {
		require.NotContains(t, out, "hunter2")
		require.NotContains(t, out, "s3cr3t")
	}
}

// protocols returns the protocols with HTTP/1 and HTTP/2 as given.
func protocols(http1, http2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(http1)
	p.SetHTTP2(http2)
	return p
}

// unencryptedH2 returns HTTP/1 and unencrypted HTTP/2.
func unencryptedH2() http.Protocols {
	p := protocols(true, false)
	p.SetUnencryptedHTTP2(true)
	return p
}

// requireEveryConnAnswered checks that every connection that answered a
// request answered n of them.
func requireEveryConnAnswered(t *testing.T, rep *probe.Result, n int) {
	t.Helper()
	pc := rep.PerConn
	require.Equal(t, []any{n, n, float64(n)}, []any{pc.Min, pc.Max, pc.Mean}, "requests per connection: min, max, mean")
}

func TestOptionErrors(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	require.NoError(t, err)
	bad := map[string][]probe.Option{
		"no requests":       {probe.Requests(0)},
		"too many requests": {probe.Requests(1_000_001)},
		"no concurrency":    {probe.Concurrency(0)},
		"concurrency > n":   {probe.Requests(2), probe.Concurrency(3)},
		"negative cap":      {probe.MaxConnsPerHost(-1)},
		"negative gap":      {probe.Gap(-time.Second)},
		"zero timeout":      {probe.Timeout(0)},
		"zero deadline":     {probe.Deadline(0)},
		"negative max body": {probe.MaxBody(-1)},
		"discovery bound 1": {probe.FindMaxRequests(1)},
		"zero max idle":     {probe.FindIdleTimeout(0)},
		"no protocol":       {probe.Protocols(protocols(false, false))},
		"h2 over http":      {probe.Protocols(protocols(false, true))},
		"nil option":        {nil},
		"nil TLS config":    {probe.TLSClientConfig(nil)},
		"nil progress":      {probe.OnProgress(nil)},
		"zero client idle":  {probe.IdleConnTimeout(0)},
		"unencrypted h2":    {probe.Protocols(unencryptedH2())},
	}
	for name, opts := range bad {
		rep, err := probe.Run(t.Context(), req, opts...)
		require.Error(t, err, name)
		require.Nil(t, rep, name)
		var ue *probe.UnusableError
		require.False(t, errors.As(err, &ue), name)
	}
	// The protocol choices that make no sense say which choices do.
	for _, c := range []struct {
		opt  probe.Option
		want string
	}{
		{probe.Protocols(protocols(false, false)), "probe: Protocols allows no protocol; want HTTP/1, HTTP/2 or both"},
		{probe.Protocols(unencryptedH2()), "unencrypted HTTP/2 is not supported; want HTTP/1, HTTP/2 or both"},
		{probe.Protocols(protocols(false, true)), "probe: HTTP/2 can only be required of an https URL"},
	} {
		_, err := probe.Run(t.Context(), req, c.opt)
		require.ErrorContains(t, err, c.want)
	}
	_, err = probe.Run(t.Context(), nil)
	require.Error(t, err)
	ftp, err := http.NewRequest(http.MethodGet, "ftp://127.0.0.1/", nil)
	require.NoError(t, err)
	_, err = probe.Run(t.Context(), ftp)
	require.Error(t, err)
	withBody, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", io.NopCloser(strings.NewReader("x")))
	require.NoError(t, err)
	_, err = probe.Run(t.Context(), withBody)
	require.ErrorContains(t, err, "GetBody")
}

func TestBodyReplayed(t *testing.T) {
	t.Parallel()
	var bodies atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && string(b) == "payload" {
			bodies.Add(1)
		}
	})))
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("payload"))
	require.NoError(t, err)
	rep, err := probe.Run(t.Context(), req, probe.Requests(3), probe.Deadline(guard))
	require.NoError(t, err)
	require.Equal(t, "POST", rep.Method)
	require.EqualValues(t, 3, bodies.Load(), "each request carries the body")
	require.EqualValues(t, 1, rep.Dials)
	requireAccepted(t, s, rep.Dials, "probe dials = server accepts")
}

func TestProgress(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	var calls []probe.Progress
	rep := mustProbe(t, s, probe.Requests(3), probe.FindMaxRequests(2),
		probe.OnProgress(func(p probe.Progress) { calls = append(calls, p) }))
	require.Equal(t, 3, rep.Requests)
	var main, timelines, disc int
	for _, p := range calls {
		switch {
		case p.Phase == "requests" && p.Timeline != nil:
			timelines++
		case p.Phase == "requests":
			main++
			require.Equal(t, 3, p.Total)
		case p.Phase == "find-max-requests":
			disc++
		}
	}
	require.Equal(t, 4, main, "one per request and one at the end")
	require.Equal(t, 3, timelines, "one per main-run timeline")
	require.Equal(t, 2, disc)
}

// neverAnswers starts a server whose handler waits for the client to go.
func neverAnswers(t *testing.T) *server {
	t.Helper()
	return startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})))
}

func TestInterrupted(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	})))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-entered
		cancel()
	}()
	req, err := http.NewRequest(http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	rep, err := probe.Run(ctx, req, probe.Requests(5), probe.Deadline(guard), probe.FindIdleTimeout(time.Second))
	require.NoError(t, err, "an interruption is not an unusable target")
	require.True(t, rep.Interrupted)
	require.False(t, rep.DeadlineReached)
	require.Equal(t, 1, rep.Requests)
	require.Equal(t, 1, rep.Cut)
	require.Equal(t, map[httptrace.Class]int{vocab.ClassCanceled: 1}, rep.Outcomes)
	requireAccepted(t, s, rep.Dials)
	requireFindings(t, rep)
}

// TestTimeoutMidRun times out the second of four requests (its handler
// answers only once the client gave up) and checks that the requests after
// it are bounded afresh and succeed: one deadline, three ok, a new
// connection after the timed-out one.
func TestTimeoutMidRun(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	s := startCounting(t, httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 2 {
			<-r.Context().Done() // the client closed the connection
			return
		}
		w.Write([]byte("ok"))
	})))
	rep := mustProbe(t, s, probe.Requests(4), probe.Timeout(200*time.Millisecond))
	require.Equal(t, map[httptrace.Class]int{vocab.ClassOK: 3, vocab.ClassDeadline: 1}, rep.Outcomes)
	require.Len(t, rep.Failures, 1)
	require.Equal(t, vocab.StageAwaitHeaders, rep.Failures[0].Stage)
	require.Contains(t, rep.Failures[0].Error, "request timeout")
	require.EqualValues(t, 2, rep.Dials, "the timed-out request's connection is closed")
	requireAccepted(t, s, rep.Dials)
}

// TestSwitchingProtocolsNotRead probes a server that switches protocols
// and then stays silent: a 101 response's body is the connection itself,
// which no timeout bounds, so the probe must close it unread rather than
// wait on it for ever.
func TestSwitchingProtocolsNotRead(t *testing.T) {
	t.Parallel()
	var closed testserver.Counter
	s := rawServer(t, switchingProtocols(&closed))
	req, err := http.NewRequest(http.MethodGet, s.URL+"/", nil)
	require.NoError(t, err)
	type result struct {
		rep *probe.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := probe.Run(t.Context(), req, probe.Requests(3), probe.Deadline(guard))
		done <- result{rep, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(2 * guard):
		t.Fatal("the probe waits on a 101 response's body")
	}
	require.NoError(t, res.err)
	rep := res.rep
	require.Equal(t, 3, rep.Requests)
	require.Equal(t, map[int]int{http.StatusSwitchingProtocols: 3}, rep.Statuses)
	require.Equal(t, map[httptrace.Class]int{vocab.ClassOK: 3}, rep.Outcomes)
	require.EqualValues(t, 3, rep.Dials, "a switched connection serves no other request")
	requireAccepted(t, s, rep.Dials)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	require.NoError(t, closed.WaitAtLeast(ctx, 3), "the probe closed every switched connection")
	require.EqualValues(t, 3, s.requests.Load())
}
