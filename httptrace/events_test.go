package httptrace_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	stdtrace "net/http/httptrace"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// TestEveryEventKind sends one HTTPS request to "localhost" (resolved from
// /etc/hosts, never by a DNS server) with "Expect: 100-continue" and a body,
// to a handler that sends 103 Early Hints before its 200, and checks that
// every kind of event was recorded exactly as often as it happened, in the
// order causality imposes.
func TestEveryEventKind(t *testing.T) {
	srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the first read sends "100 Continue"
		w.Header().Set("Link", "</app.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}), false)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	cfg := trust(srv)
	cfg.ServerName = "example.com" // a name the httptest certificate covers
	base := newBase(t, &http.Transport{TLSClientConfig: cfg, ExpectContinueTimeout: guard})
	tr, c := traced(t, base, nil)

	req := newRequest(t, guardCtx(t), http.MethodPost, "https://localhost:"+port+"/events", strings.NewReader("hello"))
	req.Header.Set("Expect", "100-continue")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hello", string(body))
	require.Empty(t, c.Timelines(), "the timeline finishes when the body is closed")
	require.NoError(t, resp.Body.Close())

	tl := only(t, c)
	for _, k := range vocab.Kinds {
		if k == vocab.KindBodyHeld || k == vocab.KindBodyCollected || k == vocab.KindIdlePoolChurn {
			continue // events of a body left open, and a pool's
		}
		assert.NotEqual(t, -1, index(tl, k, -1), "no %s event in %v", k, kindsOf(tl))
	}
	requireCounts(t, tl, map[httptrace.Kind]int{
		vocab.KindGetConn: 1, vocab.KindGotConn: 1,
		vocab.KindDNSStart: 1, vocab.KindDNSDone: 1,
		vocab.KindConnectStart: len(tl.DNS.Addrs), vocab.KindConnectDone: len(tl.DNS.Addrs),
		vocab.KindTLSStart: 1, vocab.KindTLSDone: 1,
		vocab.KindWroteHeaders: 1, vocab.KindWait100Continue: 1,
		vocab.KindGot1xx:       2, // 100 Continue, 103 Early Hints: once each
		vocab.KindWroteRequest: 1, vocab.KindFirstByte: 1, vocab.KindResponse: 1,
		vocab.KindBodyEOF: 1, vocab.KindBodyClose: 1, vocab.KindPutIdleConn: 1, vocab.KindDone: 1,
	})
	for _, e := range tl.Events {
		assert.False(t, e.Late, "late %s", e.Kind)
	}

	// Orders that causality guarantees, whatever goroutine recorded them.
	// Not wrote-request: net/http writes a body straight to the socket
	// (bufio.Writer.ReadFrom) and calls WroteRequest afterwards, so the
	// server's answer may be recorded first.
	order := [][2]int{
		{index(tl, vocab.KindGetConn, -1), index(tl, vocab.KindDNSStart, -1)},
		{index(tl, vocab.KindDNSStart, -1), index(tl, vocab.KindDNSDone, -1)},
		{index(tl, vocab.KindDNSDone, -1), index(tl, vocab.KindConnectStart, -1)},
		{index(tl, vocab.KindConnectStart, -1), index(tl, vocab.KindConnectDone, -1)},
		{index(tl, vocab.KindConnectDone, -1), index(tl, vocab.KindTLSStart, -1)},
		{index(tl, vocab.KindTLSStart, -1), index(tl, vocab.KindTLSDone, -1)},
		{index(tl, vocab.KindTLSDone, -1), index(tl, vocab.KindGotConn, -1)},
		{index(tl, vocab.KindGotConn, -1), index(tl, vocab.KindWroteHeaders, -1)},
		{index(tl, vocab.KindWroteHeaders, -1), index(tl, vocab.KindWait100Continue, -1)},
		{index(tl, vocab.KindWroteHeaders, -1), index(tl, vocab.KindFirstByte, -1)},
		{index(tl, vocab.KindFirstByte, -1), index(tl, vocab.KindGot1xx, 100)},
		{index(tl, vocab.KindGot1xx, 100), index(tl, vocab.KindGot1xx, 103)},
		{index(tl, vocab.KindGot1xx, 103), index(tl, vocab.KindResponse, -1)},
		{index(tl, vocab.KindResponse, -1), index(tl, vocab.KindPutIdleConn, -1)},
		{index(tl, vocab.KindPutIdleConn, -1), index(tl, vocab.KindBodyEOF, -1)},
		{index(tl, vocab.KindBodyEOF, -1), index(tl, vocab.KindBodyClose, -1)},
		{index(tl, vocab.KindBodyClose, -1), index(tl, vocab.KindDone, -1)},
	}
	for _, o := range order {
		assert.Less(t, o[0], o[1], "%s before %s in %v", tl.Events[o[0]].Kind, tl.Events[o[1]].Kind, kindsOf(tl))
	}
	assert.Equal(t, len(tl.Events)-1, index(tl, vocab.KindDone, -1), "done is the last event")

	assert.Equal(t, "localhost", tl.DNS.Host)
	assert.NoError(t, tl.DNS.Err)
	require.NotEmpty(t, tl.DNS.Addrs)
	assert.Equal(t, "127.0.0.1", tl.DNS.Addrs[0].IP.String())
	if e, ok := tl.First(vocab.KindConnectDone); assert.True(t, ok) {
		assert.Equal(t, "127.0.0.1:"+port, e.Addr)
		assert.NoError(t, e.Err)
	}

	require.NotNil(t, resp.TLS)
	assert.True(t, tl.TLS.Done)
	assert.NoError(t, tl.TLS.Err)
	assert.Equal(t, resp.TLS.Version, tl.TLS.Version)
	assert.NotZero(t, tl.TLS.Version)
	assert.Equal(t, resp.TLS.CipherSuite, tl.TLS.CipherSuite)
	assert.NotEqual(t, "", tls.CipherSuiteName(tl.TLS.CipherSuite))
	assert.Equal(t, resp.TLS.NegotiatedProtocol, tl.TLS.ALPN)
	assert.Equal(t, "example.com", tl.TLS.ServerName)

	assert.Equal(t, "POST", tl.Method)
	assert.Equal(t, "localhost:"+port, tl.Host)
	assert.Equal(t, "https://localhost:"+port+"/events", tl.URL())
	assert.Equal(t, http.StatusOK, tl.Status)
	assert.Equal(t, "HTTP/1.1", tl.Proto)
	assert.Equal(t, int64(5), tl.BodyBytes)
	assert.True(t, tl.BodyEOF)
	assert.True(t, tl.BodyClosed)
	assert.False(t, tl.ClosedEarly)
	assert.Equal(t, 1, tl.GetConns)
	assert.False(t, tl.Composed)
	assert.True(t, tl.Finished)
	assert.True(t, tl.Conn.New())
	assert.True(t, tl.Conn.Dialed)
	assert.False(t, tl.Conn.WasIdle)
	assert.Equal(t, srv.Listener.Addr().String(), tl.Conn.Remote.String())
	assert.Equal(t, httptrace.Outcome{Class: vocab.ClassOK, Stage: vocab.StageBody, Status: 200}, tl.Outcome)
	if e, ok := tl.Last(vocab.KindBodyEOF); assert.True(t, ok) {
		assert.Equal(t, int64(5), e.N)
	}
	if e, ok := tl.Last(vocab.KindResponse); assert.True(t, ok) {
		assert.Equal(t, int64(200), e.N)
	}
}

// TestConnectEachAddress resolves a name to two addresses through a DNS
// server on loopback: the first refuses, the second serves. Each address
// gets its own connect-start and connect-done.
func TestConnectEachAddress(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	res, dns := startDNS(t, map[string][]netip.Addr{
		"two.connaudit.test": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")},
	})
	base := newBase(t, &http.Transport{DialContext: (&net.Dialer{Resolver: res}).DialContext})
	tr, c := traced(t, base, nil)

	fetch(t, tr, "http://two.connaudit.test:"+port+"/")
	tl := only(t, c)
	assert.Positive(t, dns.queries.Load())
	assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
	assert.Equal(t, "two.connaudit.test", tl.DNS.Host)
	assert.Len(t, tl.DNS.Addrs, 2)
	if e, ok := tl.First(vocab.KindDNSDone); assert.True(t, ok) {
		assert.Equal(t, int64(2), e.N)
	}
	requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindConnectStart: 2, vocab.KindConnectDone: 2})
	started, failed, ok := map[string]bool{}, 0, 0
	for _, e := range tl.Events {
		switch e.Kind {
		case vocab.KindConnectStart:
			started[e.Addr] = true
		case vocab.KindConnectDone:
			if e.Err != nil {
				failed++
				assert.Equal(t, "127.0.0.2:"+port, e.Addr)
				assert.Equal(t, vocab.ClassConnectRefused, httptrace.Classify(e.Err, vocab.StageConnect))
			} else {
				ok++
				assert.Equal(t, "127.0.0.1:"+port, e.Addr)
			}
		}
	}
	assert.Equal(t, map[string]bool{"127.0.0.2:" + port: true, "127.0.0.1:" + port: true}, started)
	assert.Equal(t, 1, failed)
	assert.Equal(t, 1, ok)
	assert.True(t, tl.Conn.Dialed)
}

// TestNewThenReused checks that the first request dials and the second
// reuses the idle connection, with its idle time recorded and no DNS,
// connect or TLS events of its own.
func TestNewThenReused(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var dc dialCounter
	base := newBase(t, &http.Transport{DialContext: dc.DialContext})
	tr, c := traced(t, base, nil)

	fetch(t, tr, srv.URL+"/one")
	fetch(t, tr, srv.URL+"/two")
	tls := waitTimelines(t, c, 2)
	require.Len(t, tls, 2)
	first, second := tls[0], tls[1]
	assert.Equal(t, int64(1), dc.dials.Load())

	assert.True(t, first.Conn.New())
	assert.True(t, first.Conn.Dialed)
	assert.False(t, first.Conn.WasIdle)
	assert.Equal(t, uint64(1), first.Conn.ID)
	requireCounts(t, first, map[httptrace.Kind]int{vocab.KindConnectStart: 1, vocab.KindConnectDone: 1})

	assert.False(t, second.Conn.New())
	assert.False(t, second.Conn.Dialed)
	assert.True(t, second.Conn.Reused)
	assert.True(t, second.Conn.WasIdle)
	assert.Positive(t, second.Conn.IdleTime, "idle time recorded")
	assert.Equal(t, second.Conn.IdleTime, second.Timings().IdleFor)
	assert.False(t, second.Timings().NewConn)
	assert.Equal(t, uint64(1), second.Conn.ID, "same connection")
	assert.Equal(t, first.Conn.Local.String(), second.Conn.Local.String())
	requireCounts(t, second, map[httptrace.Kind]int{
		vocab.KindDNSStart: 0, vocab.KindConnectStart: 0, vocab.KindConnectDone: 0, vocab.KindTLSStart: 0,
		vocab.KindGetConn: 1, vocab.KindGotConn: 1, vocab.KindPutIdleConn: 1, vocab.KindDone: 1,
	})
	if e, ok := second.First(vocab.KindGotConn); assert.True(t, ok) {
		assert.Equal(t, int64(1), e.N, "got-conn N is 1 for a reused connection")
		assert.Equal(t, uint64(1), e.Conn)
	}
	for _, tl := range tls {
		for _, e := range tl.Events {
			if e.Kind >= vocab.KindGotConn && e.Kind != vocab.KindDNSStart && e.Kind != vocab.KindDNSDone &&
				e.Kind != vocab.KindConnectStart && e.Kind != vocab.KindConnectDone &&
				e.Kind != vocab.KindTLSStart && e.Kind != vocab.KindTLSDone {
				assert.Equal(t, uint64(1), e.Conn, "%s carries the connection id", e.Kind)
			}
		}
	}
}

// TestEarlyCloseVersusEOF: a body closed before EOF is ClosedEarly and costs
// the connection; a body read to EOF, even before Close, gives it back.
func TestEarlyCloseVersusEOF(t *testing.T) {
	payload := strings.Repeat("x", 64<<10)
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, payload) }))
	var dc dialCounter
	base := newBase(t, &http.Transport{DialContext: dc.DialContext})
	tr, c := traced(t, base, nil)
	ctx := guardCtx(t)

	// Early close: 10 bytes read of 64 KiB.
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL+"/early", nil))
	require.NoError(t, err)
	buf := make([]byte, 10)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	early := only(t, c)
	assert.True(t, early.ClosedEarly)
	assert.False(t, early.BodyEOF)
	assert.True(t, early.BodyClosed)
	assert.Equal(t, int64(10), early.BodyBytes)
	assert.Equal(t, vocab.ClassOK, early.Outcome.Class, "closing early is the caller's choice, not a failure")
	requireCounts(t, early, map[httptrace.Kind]int{vocab.KindBodyEOF: 0, vocab.KindBodyClose: 1, vocab.KindPutIdleConn: 0, vocab.KindDone: 1})
	if e, ok := early.Last(vocab.KindBodyClose); assert.True(t, ok) {
		assert.Equal(t, int64(10), e.N)
	}

	// The next request needs a new connection (Go 1.26 closes, it does not drain).
	fetch(t, tr, srv.URL+"/after-early")
	if strings.HasPrefix(runtime.Version(), "go1.26") {
		assert.Equal(t, int64(2), dc.dials.Load(), "early Close cost the connection")
		assert.True(t, waitTimelines(t, c, 2)[1].Conn.New())
	}

	// Read to EOF: the timeline waits for Close, the connection is idle already.
	resp, err = tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL+"/eof", nil))
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.Equal(t, int64(len(payload)), n)
	require.Len(t, c.Timelines(), 2, "not finished before Close")
	dials := dc.dials.Load()
	fetch(t, tr, srv.URL+"/while-unclosed") // reuses the connection of /eof
	assert.Equal(t, dials, dc.dials.Load(), "a body read to EOF gives its connection back before Close")
	require.NoError(t, resp.Body.Close())

	tls := waitTimelines(t, c, 4)
	var eof *httptrace.Timeline
	for _, tl := range tls {
		if u, _ := url.Parse(tl.URL()); u.Path == "/eof" {
			eof = tl
		}
	}
	require.NotNil(t, eof)
	assert.True(t, eof.BodyEOF)
	assert.False(t, eof.ClosedEarly)
	assert.Equal(t, int64(len(payload)), eof.BodyBytes)
	requireCounts(t, eof, map[httptrace.Kind]int{vocab.KindBodyEOF: 1, vocab.KindBodyClose: 1, vocab.KindPutIdleConn: 1})
	if e, ok := eof.Last(vocab.KindBodyEOF); assert.True(t, ok) {
		assert.Equal(t, int64(len(payload)), e.N)
	}
	assert.Equal(t, vocab.ClassOK, eof.Outcome.Class)
}

// TestEmptyBodyIsNotClosedEarly: a response without a body (HEAD, 204,
// Content-Length: 0) comes with http.NoBody and its connection already back
// in the pool; closing it unread is no early close and costs nothing.
func TestEmptyBodyIsNotClosedEarly(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/empty":
			w.Header().Set("Content-Length", "0")
		default:
			io.WriteString(w, "body for GET, none for HEAD")
		}
	}))
	dc := &dialCounter{}
	tr, c := traced(t, newBase(t, &http.Transport{DialContext: dc.DialContext}), nil)
	for _, r := range []struct{ method, path string }{{http.MethodHead, "/"}, {http.MethodGet, "/204"}, {http.MethodGet, "/empty"}} {
		resp, err := tr.RoundTrip(newRequest(t, guardCtx(t), r.method, srv.URL+r.path, nil))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close()) // unread
	}
	tls := waitTimelines(t, c, 3)
	require.Len(t, tls, 3)
	for _, tl := range tls {
		assert.False(t, tl.ClosedEarly, "%s %s", tl.Method, tl.URL())
		assert.True(t, tl.BodyEOF, "%s %s", tl.Method, tl.URL())
		assert.Equal(t, int64(0), tl.BodyBytes)
		assert.Equal(t, 1, tl.Count(vocab.KindBodyEOF))
		assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
	}
	assert.Equal(t, int64(1), dc.dials.Load(), "one connection served all three")
}

// TestBodilessWrite checks the write events of HTTP/1 requests without a
// body, which the recorder takes from one hook: a GET records wrote-headers
// and then wrote-request, once each, at one time, before the first byte of
// the response (HTTP/1 reports both before it flushes the request; for
// HTTP/2 they may come late: TestHTTP2Timeline). A POST with a body records
// wrote-headers from its own hook, before the response. A caller's own
// WroteHeaders hook is still called for a GET.
func TestBodilessWrite(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	}))
	tr, c := traced(t, newBase(t, nil), nil)

	var callerHeaders atomic.Int64
	ctx := stdtrace.WithClientTrace(guardCtx(t), &stdtrace.ClientTrace{WroteHeaders: func() { callerHeaders.Add(1) }})
	for i, req := range []*http.Request{
		newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil),
		newRequest(t, ctx, http.MethodGet, srv.URL, nil),
		newRequest(t, guardCtx(t), http.MethodPost, srv.URL, strings.NewReader("hello")),
	} {
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		tl := waitTimelines(t, c, i+1)[i]
		if req.Body != nil {
			// The handler reads the body before it answers, so the
			// headers were written first; wrote-request may come after
			// the response (see TestEveryEventKind).
			assert.Less(t, index(tl, vocab.KindWroteHeaders, -1), index(tl, vocab.KindFirstByte, -1), "%v", kindsOf(tl))
			continue
		}
		requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindWroteHeaders: 1, vocab.KindWroteRequest: 1})
		h, w := index(tl, vocab.KindWroteHeaders, -1), index(tl, vocab.KindWroteRequest, -1)
		assert.Equal(t, h+1, w, "wrote-headers just before wrote-request in %v", kindsOf(tl))
		assert.Equal(t, tl.Events[h].At, tl.Events[w].At, "one time for both")
		assert.Less(t, w, index(tl, vocab.KindFirstByte, -1), "%v", kindsOf(tl))
	}
	assert.Equal(t, int64(1), callerHeaders.Load(), "the caller's WroteHeaders hook")
}
