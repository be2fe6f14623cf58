package httptrace_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	stdtrace "net/http/httptrace"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// callerTrace counts the calls of a caller's own ClientTrace hooks.
type callerTrace struct {
	getConn, gotConn, dnsStart, dnsDone, connectStart, connectDone atomic.Int64
	tlsStart, tlsDone, wroteHeaders, wroteRequest, firstByte       atomic.Int64
}

func (ct *callerTrace) trace() *stdtrace.ClientTrace {
	return &stdtrace.ClientTrace{
		GetConn:              func(string) { ct.getConn.Add(1) },
		GotConn:              func(stdtrace.GotConnInfo) { ct.gotConn.Add(1) },
		DNSStart:             func(stdtrace.DNSStartInfo) { ct.dnsStart.Add(1) },
		DNSDone:              func(stdtrace.DNSDoneInfo) { ct.dnsDone.Add(1) },
		ConnectStart:         func(string, string) { ct.connectStart.Add(1) },
		ConnectDone:          func(string, string, error) { ct.connectDone.Add(1) },
		TLSHandshakeStart:    func() { ct.tlsStart.Add(1) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { ct.tlsDone.Add(1) },
		WroteHeaders:         func() { ct.wroteHeaders.Add(1) },
		WroteRequest:         func(stdtrace.WroteRequestInfo) { ct.wroteRequest.Add(1) },
		GotFirstResponseByte: func() { ct.firstByte.Add(1) },
	}
}

func (ct *callerTrace) counts() map[string]int64 {
	return map[string]int64{
		"GetConn": ct.getConn.Load(), "GotConn": ct.gotConn.Load(),
		"DNSStart": ct.dnsStart.Load(), "DNSDone": ct.dnsDone.Load(),
		"ConnectStart": ct.connectStart.Load(), "ConnectDone": ct.connectDone.Load(),
		"TLSHandshakeStart": ct.tlsStart.Load(), "TLSHandshakeDone": ct.tlsDone.Load(),
		"WroteHeaders": ct.wroteHeaders.Load(), "WroteRequest": ct.wroteRequest.Load(),
		"GotFirstResponseByte": ct.firstByte.Load(),
	}
}

func each(n int64, names ...string) map[string]int64 {
	m := map[string]int64{}
	for _, name := range names {
		m[name] = n
	}
	return m
}

// TestComposeWithCallerTrace: a caller's own ClientTrace in the request
// context still sees each hook exactly once, the timeline records each event
// once too, and the composed trace never leaks into the next request.
func TestComposeWithCallerTrace(t *testing.T) {
	srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), false)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	cfg := trust(srv)
	cfg.ServerName = "example.com"
	base := newBase(t, &http.Transport{TLSClientConfig: cfg})
	tr, c := traced(t, base, nil)
	url := "https://localhost:" + port + "/"

	var ct callerTrace
	all := []string{"GetConn", "GotConn", "DNSStart", "DNSDone", "ConnectStart", "ConnectDone",
		"TLSHandshakeStart", "TLSHandshakeDone", "WroteHeaders", "WroteRequest", "GotFirstResponseByte"}
	perRequest := []string{"GetConn", "GotConn", "WroteHeaders", "WroteRequest", "GotFirstResponseByte"}

	// 1: a new connection, composed.
	send := func(withTrace bool) {
		ctx := guardCtx(t)
		if withTrace {
			ctx = stdtrace.WithClientTrace(ctx, ct.trace())
		}
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, url, nil))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	send(true)
	assert.Equal(t, each(1, all...), ct.counts())

	// 2: no caller trace: the caller's hooks must not fire.
	send(false)
	assert.Equal(t, each(1, all...), ct.counts(), "the caller's hooks fired for a request without them")

	// 3: composed again, on the reused connection: once more each.
	send(true)
	want := each(1, all...)
	for _, name := range perRequest {
		want[name] = 2
	}
	assert.Equal(t, want, ct.counts())

	// 4: plain again.
	send(false)
	assert.Equal(t, want, ct.counts())

	tls := waitTimelines(t, c, 4)
	require.Len(t, tls, 4)
	for i, tl := range tls {
		assert.Equal(t, i%2 == 0, tl.Composed, "request %d", i+1)
		assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
		requireCounts(t, tl, map[httptrace.Kind]int{
			vocab.KindGetConn: 1, vocab.KindGotConn: 1, vocab.KindWroteHeaders: 1,
			vocab.KindWroteRequest: 1, vocab.KindFirstByte: 1, vocab.KindResponse: 1,
			vocab.KindBodyEOF: 1, vocab.KindBodyClose: 1, vocab.KindDone: 1,
		})
		dial := 0
		if i == 0 {
			dial = 1
		}
		requireCounts(t, tl, map[httptrace.Kind]int{
			vocab.KindDNSStart: dial, vocab.KindDNSDone: dial, vocab.KindConnectStart: dial,
			vocab.KindConnectDone: dial, vocab.KindTLSStart: dial, vocab.KindTLSDone: dial,
		})
	}
	assert.Empty(t, c.Late())
}
