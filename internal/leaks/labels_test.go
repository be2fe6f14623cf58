package leaks

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const key = "leaks.test"

// The goroutines that code run under a label starts, directly or not,
// carry it: net/http's client read and write loops over HTTP/1, its
// HTTP/2 connection's read loop over TLS, a server's accept loop and
// connection goroutines. Those of the caller reading the profile do not
// count; those of another label are not seen.
func TestLabelsInherited(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	var h1, h2 *httptest.Server
	var tr1, tr2 *http.Transport
	pprof.Do(t.Context(), pprof.Labels(key, "A"), func(ctx context.Context) {
		h1 = httptest.NewServer(h)
		h2 = httptest.NewUnstartedServer(h)
		h2.EnableHTTP2 = true
		h2.StartTLS()
		tr1 = &http.Transport{}
		tr2 = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h2.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
			ForceAttemptHTTP2: true}
		for _, c := range []struct {
			tr    *http.Transport
			url   string
			proto string
		}{{tr1, h1.URL, "HTTP/1.1"}, {tr2, h2.URL, "HTTP/2.0"}} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
			require.NoError(t, err)
			resp, err := c.tr.RoundTrip(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, c.proto, resp.Proto)
		}
	})
	names := strings.Join(Labeled(key, "A"), "\n")
	for _, want := range []string{
		"net/http.(*persistConn).readLoop", "net/http.(*persistConn).writeLoop", // HTTP/1 client
		"net/http.(*http2ClientConn).readLoop",               // HTTP/2 client, over TLS
		"net/http.(*conn).serve", "net/http.(*Server).Serve", // the servers
	} {
		require.Contains(t, names, want)
	}
	require.Empty(t, Labeled(key, "B"))
	require.NotContains(t, names, "writeRuntimeProfile", "the caller's own goroutine")

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	err := WaitLabeled(ctx, key, "A")
	cancel()
	require.ErrorContains(t, err, "leaked goroutines: ")
	require.ErrorContains(t, err, "net/http.(*persistConn).readLoop")

	tr1.CloseIdleConnections()
	tr2.CloseIdleConnections()
	h1.Close()
	h2.Close()
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, WaitLabeled(ctx, key, "A"))
}
