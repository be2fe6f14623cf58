package httptrace_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
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
		require.NoError(t, httptrace.WriteWaterfall(&b, tl))
		return b.String()
	}
	refusedWF, tlsWF, okWF := waterfall(tls[0]), waterfall(tls[1]), waterfall(tls[2])
	require.Equal(t, httptrace.ClassConnectRefused, tls[0].Outcome.Class)
	require.Contains(t, refusedWF, "connection  none: the request got no connection")
	require.NotContains(t, refusedWF, "reused")

	require.Equal(t, httptrace.ClassTLS, tls[1].Outcome.Class)
	require.Contains(t, tlsWF, "tls         handshake failed")
	require.NotContains(t, tlsWF, "0x0000")

	require.Equal(t, httptrace.ClassOK, tls[2].Outcome.Class)
	require.Contains(t, okWF, " new ")
}
