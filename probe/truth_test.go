package probe_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// keepAliveServer starts a server whose responses carry the Keep-Alive
// header value ka and, with closeEvery > 0, Connection: close on every
// closeEvery-th response of a connection.
func keepAliveServer(t *testing.T, ka string, closeEvery int, configure ...func(*httptest.Server)) *server {
	t.Helper()
	type key struct{}
	var s *server
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.Context().Value(key{}).(*atomic.Int64).Add(1)
		s.requests.Add(1)
		w.Header().Set("Keep-Alive", ka)
		if closeEvery > 0 && int(n)%closeEvery == 0 {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	hs.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, key{}, new(atomic.Int64))
	}
	for _, f := range configure {
		f(hs)
	}
	s = startCounting(t, hs)
	return s
}

// TestKeepAliveAdvertised: the server's Keep-Alive header is reported, and
// a timeout it advertises below the client's idle timeout is a finding
// even when the run saw no idle close.
func TestKeepAliveAdvertised(t *testing.T) {
	t.Parallel()
	s := keepAliveServer(t, "timeout=5, max=100", 0)
	rep := mustProbe(t, s, probe.Requests(3))
	require.Equal(t, "timeout=5, max=100", rep.KeepAlive.Header)
	require.Equal(t, 3, rep.KeepAlive.Responses)
	require.Equal(t, 5*time.Second, rep.KeepAlive.Timeout)
	require.Equal(t, 100, rep.KeepAlive.Max)
	require.Positive(t, rep.RequestsPerSecond)
	requireFindings(t, rep, "server-idle-shorter-than-client")
	f, _ := rep.Has("server-idle-shorter-than-client")
	require.Contains(t, f.Message, "advertises an idle timeout of 5s")

	// A client that keeps idle connections for less is fine.
	rep = mustProbe(t, s, probe.Requests(3), probe.IdleConnTimeout(4*time.Second))
	requireFindings(t, rep)
}

// TestKeepAliveHeaderDiffers: a server that advertises max=100 and closes
// every connection after 2 requests promises more than it keeps.
func TestKeepAliveHeaderDiffers(t *testing.T) {
	t.Parallel()
	s := keepAliveServer(t, "timeout=60, max=100", 2)
	rep := mustProbe(t, s, probe.Requests(6), probe.IdleConnTimeout(30*time.Second))
	require.Equal(t, 6, rep.Outcomes[vocab.ClassOK])
	requireFindings(t, rep, "server-closes-every-n", "keep-alive-header-differs")
	f, _ := rep.Has("keep-alive-header-differs")
	require.Contains(t, f.Message, "closed connections after 2 requests, fewer than its max of 100")
}

// TestKeepAliveHeaderTimeoutDiffers: a server that advertises a 60s idle
// timeout and closes idle connections after 50ms promises more than it
// keeps, and the advice on the client's idle timeout takes what it does,
// the smaller.
func TestKeepAliveHeaderTimeoutDiffers(t *testing.T) {
	t.Parallel()
	s := keepAliveServer(t, "timeout=60", 0, withIdleTimeout(50*time.Millisecond))
	rep := mustProbe(t, s, probe.Requests(2), probe.FindIdleTimeout(time.Second))
	i := rep.Discovery.IdleTimeout
	require.True(t, i.Found, "%+v", i)
	require.Contains(t, ids(rep), "keep-alive-header-differs")
	f, _ := rep.Has("keep-alive-header-differs")
	require.Contains(t, f.Message, "sooner than its timeout of 1m0s")
	f, _ = rep.Has("server-idle-shorter-than-client")
	require.Contains(t, f.Message, "it advertises Keep-Alive: timeout=60")
	require.Contains(t, f.Message, "keep the client's idle timeout below "+humanish(max(i.Survived, i.Closed/2)))
}

// humanish rounds d as the report does below a second.
func humanish(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

// staleAfterFirst answers the first request of a connection with
// keep-alive and the Keep-Alive header value ka, then waits for the next
// request to arrive and closes the connection without reading it: the
// server processes one request per connection, as a server does whose
// idle timeout expired as the next request came.
func staleAfterFirst(ka string) func(*server, net.Conn) {
	return func(s *server, c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req.Body.Close()
		s.requests.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nKeep-Alive: "+ka+"\r\nContent-Length: 2\r\n\r\nok")
		br.Peek(1) // the next request came; the connection closes unread
	}
}

// TestStaleRetryNotProcessed: a request sent on a connection idle for the
// server's advertised idle timeout, which the server closed without a
// response byte, was not processed: the Transport's retry of it is no
// finding. The same retry after no idle time is possibly processed.
func TestStaleRetryNotProcessed(t *testing.T) {
	t.Parallel()
	t.Run("idle past the advertised timeout", func(t *testing.T) {
		t.Parallel()
		s := rawServer(t, staleAfterFirst("timeout=1"))
		rep := mustProbe(t, s, probe.Requests(3), probe.Gap(time.Second))
		require.Equal(t, 3, rep.Outcomes[vocab.ClassOK])
		require.EqualValues(t, 3, s.requests.Load(), "the server processed each request once")
		require.Equal(t, 2, rep.HiddenRetries)
		require.Equal(t, 2, rep.HiddenRetriesNotProcessed)
		require.Zero(t, rep.HiddenRetriesPossiblyProcessed)
		require.Equal(t, map[string]int{"stale-idle": 2}, rep.HiddenRetriesWhy)
		requireAcceptedDials(t, s, rep, 0)
		requireFindings(t, rep, "server-idle-shorter-than-client")
	})
	t.Run("no idle time", func(t *testing.T) {
		t.Parallel()
		s := rawServer(t, staleAfterFirst("timeout=1"))
		rep := mustProbe(t, s, probe.Requests(3))
		require.Equal(t, 3, rep.Outcomes[vocab.ClassOK])
		require.EqualValues(t, 3, s.requests.Load())
		require.Equal(t, 2, rep.HiddenRetries)
		require.Equal(t, 2, rep.HiddenRetriesPossiblyProcessed, "%v", rep.HiddenRetriesWhy)
		require.Contains(t, ids(rep), "hidden-retries")
		f, _ := rep.Has("hidden-retries")
		require.Equal(t, probe.Severity("warn"), f.Severity)
	})
}

func ids(rep *probe.Result) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.ID)
	}
	return out
}

// TestHiddenRetriesNotIdempotent: a possibly processed retry of a method
// that is not idempotent is an error.
func TestHiddenRetriesNotIdempotent(t *testing.T) {
	t.Parallel()
	s := rawServer(t, closeAfterReadingSecond)
	req, err := http.NewRequest(http.MethodPost, s.URL+"/", nil)
	require.NoError(t, err)
	// The Transport replays a POST only with an idempotency key.
	req.Header.Set("Idempotency-Key", "k")
	rep, err := probe.Run(t.Context(), req, probe.Requests(3), probe.Deadline(guard))
	require.NoError(t, err)
	require.Equal(t, 2, rep.HiddenRetriesPossiblyProcessed)
	f, ok := rep.Has("hidden-retries")
	require.True(t, ok, "%+v", rep.Findings)
	require.Equal(t, probe.Severity("error"), f.Severity)
	require.Contains(t, f.Message, "POST is not idempotent")
}

// bytesAfterResponse answers each request of a connection with a response
// followed by bytes that belong to none: net/http gives the connection up.
func bytesAfterResponse(s *server, c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req.Body.Close()
		s.requests.Add(1)
		body := "ok"
		if req.Method == http.MethodHead {
			// A body to HEAD: the response has none.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			continue
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"+body+"EXTRA")
	}
}

// TestServerBreaksEveryConnection: a server that sends bytes after each
// response, or a body to HEAD, makes the client give up every connection
// it used: the client's protocol-error closes, a finding at error, so the
// default -fail-on fails.
func TestServerBreaksEveryConnection(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			s := rawServer(t, bytesAfterResponse)
			req, err := http.NewRequest(method, s.URL+"/", nil)
			require.NoError(t, err)
			rep, err := probe.Run(t.Context(), req, probe.Requests(4), probe.Deadline(guard))
			require.NoError(t, err)
			ok := rep.Outcomes[vocab.ClassOK]
			require.Positive(t, ok)
			// A request that took the connection before net/http saw the
			// stray bytes read them as its response: a protocol failure.
			require.Equal(t, 4, ok+rep.Outcomes[vocab.ClassProtocol], "%v", rep.Outcomes)
			requireAcceptedDials(t, s, rep, 0)
			for _, c := range rep.Connections[:len(rep.Connections)-1] {
				require.Equal(t, vocab.ClosedByClient, c.ClosedBy, "%+v", c)
				require.Equal(t, vocab.ReasonProtocolError, c.CloseReason, "%+v", c)
			}
			require.Contains(t, ids(rep), "protocol-errors")
			f, _ := rep.Has("protocol-errors")
			require.Equal(t, probe.Severity("error"), f.Severity)
			require.True(t, rep.Fails("error"))
		})
	}
}

// TestKeepAliveThenCloseAtOnce: a server that answers with keep-alive and
// closes the connection at once keeps no connection alive; it has no idle
// timeout of a few microseconds.
func TestKeepAliveThenCloseAtOnce(t *testing.T) {
	t.Parallel()
	s := rawServer(t, keepAliveThenSilentClose(1))
	rep := mustProbe(t, s, probe.Requests(4))
	require.Equal(t, 4, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 4, s.requests.Load())
	got := ids(rep)
	require.Contains(t, got, "no-keep-alive", "%+v", rep.Findings)
	require.NotContains(t, got, "server-idle-shorter-than-client")
}

// h2Server starts a TLS server speaking HTTP/2 frame by frame: each
// connection answers its streams 200 "ok", except the stream numbered
// badAt (1, 2, …) of each connection, before which it sends a connection
// WINDOW_UPDATE that overflows the client's send window (RFC 9113,
// 6.9.1): a connection error for the client.
func h2Server(t *testing.T, badAt int) *server {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	cert := hs.TLS.Certificates
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	hs.Close()
	cfg := &tls.Config{Certificates: cert, NextProtos: []string{"h2"}}
	s := rawServer(t, func(s *server, c net.Conn) {
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil {
			return
		}
		var (
			hbuf bytes.Buffer
			enc  = hpack.NewEncoder(&hbuf)
			n    int
		)
		testserver.ServeH2(tc, func(fr *http2.Framer, f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				return true
			}
			n++
			s.requests.Add(1)
			if n == badAt {
				fr.WriteWindowUpdate(0, 1<<31-1)
				return true
			}
			hbuf.Reset()
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(2)})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: hbuf.Bytes(), EndHeaders: true})
			fr.WriteData(h.StreamID, true, []byte("ok"))
			return true
		})
	})
	s.URL = "https" + s.URL[len("http"):]
	s.tls = &tls.Config{RootCAs: roots, ServerName: "example.com"}
	return s
}

// TestH2ClientProtocolError: when the client drops an HTTP/2 connection
// over the server's protocol violation, the request fails with class
// "protocol" and the connection is the client's "protocol-error" close,
// not a GOAWAY of the server's.
func TestH2ClientProtocolError(t *testing.T) {
	t.Parallel()
	s := h2Server(t, 2)
	rep, err := runProbe(t, s, probe.Requests(4))
	require.NoError(t, err)
	require.Equal(t, 2, rep.Outcomes[vocab.ClassOK], "%+v", rep.Failures)
	require.Equal(t, 2, rep.Outcomes[vocab.ClassProtocol], "%+v", rep.Failures)
	require.Contains(t, rep.Failures[0].Error, "FLOW_CONTROL_ERROR")
	require.EqualValues(t, 2, rep.Dials)
	requireAcceptedDials(t, s, rep, 0)
	for _, c := range rep.Connections {
		require.Equal(t, "h2", c.Proto, "%+v", c)
		require.Equal(t, vocab.ClosedByClient, c.ClosedBy, "%+v", c)
		require.Equal(t, vocab.ReasonProtocolError, c.CloseReason, "%+v", c)
	}
	requireFindings(t, rep, "request-errors", "protocol-errors")
}

// gateListener hands out no connection until n are waiting (or the guard
// passed, or it was closed): n dials are all under way before any
// handshake can finish.
type gateListener struct {
	net.Listener
	n       int
	once    sync.Once
	mu      sync.Mutex
	pending []net.Conn
}

func (l *gateListener) Accept() (net.Conn, error) {
	l.once.Do(func() {
		for len(l.pending) < l.n {
			c, err := l.Listener.Accept()
			if err != nil {
				return
			}
			l.pending = append(l.pending, c)
		}
	})
	l.mu.Lock()
	if len(l.pending) > 0 {
		c := l.pending[0]
		l.pending = l.pending[1:]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestH2UnusedDials: eight requests at once to an HTTP/2 server dial eight
// connections; net/http keeps one and closes the others unused: a
// finding, with the close reason "h2-unused".
func TestH2UnusedDials(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0, withH2, func(hs *httptest.Server) {
		hs.Listener = &gateListener{Listener: hs.Listener, n: 8}
	})
	rep := mustProbe(t, s, probe.Requests(8), probe.Concurrency(8), probe.MaxConnsPerHost(0))
	require.Equal(t, 8, rep.Outcomes[vocab.ClassOK])
	require.EqualValues(t, 8, rep.Dials)
	requireAcceptedDials(t, s, rep, 0)
	// Each surplus connection is closed once its handshake finished
	// ("h2-unused"), abandoned during it, or kept unused beside the one
	// used.
	unused := 0
	for _, c := range rep.Connections {
		if c.Requests == 0 {
			unused++
		}
	}
	require.Equal(t, 7, unused, "%v %+v", rep.ClosedBy, rep.Connections)
	require.Equal(t, map[string]int{"h2": 1}, rep.Protocols)
	dropRacedResumption(t, rep)
	requireFindings(t, rep, "h2-unused-dials")
	f, _ := rep.Has("h2-unused-dials")
	require.Contains(t, f.Message, "dialed 7 HTTP/2 connection(s) it never used")
}

// TestDuration: with Duration alone the run sends requests until it has
// passed, not a number of them, and is complete, not cut short.
func TestDuration(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	rep := mustProbe(t, s, probe.Duration(200*time.Millisecond))
	require.Equal(t, 1_000_000, rep.Requested)
	require.Positive(t, rep.Requests)
	require.Less(t, rep.Requests, rep.Requested)
	require.Equal(t, rep.Requests, rep.Outcomes[vocab.ClassOK])
	require.False(t, rep.DeadlineReached)
	require.Equal(t, 200*time.Millisecond, rep.Duration)
	requireFindings(t, rep)

	// Requests, when given, bounds it.
	rep = mustProbe(t, s, probe.Duration(time.Hour), probe.Requests(5))
	require.Equal(t, 5, rep.Requests)
}

// TestDurationText: a run for a duration says so, and does not read as
// cut short.
func TestDurationText(t *testing.T) {
	t.Parallel()
	s := goServer(t, 0)
	rep := mustProbe(t, s, probe.Duration(50*time.Millisecond))
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b, false))
	require.Contains(t, b.String(), "requests for 50ms (at most 1000000)")
	require.NotContains(t, b.String(), "of 1000000 in")
}
