package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// TestH2IdleSinceStreamEnd checks when the pool counts an HTTP/2
// connection idle from: the body's EOF, where net/http's idle timer starts
// (the stream ended), not the body's close, which can come much later. The
// close reason of a connection the idle timer closes depends on it.
func TestH2IdleSinceStreamEnd(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	col := &httptrace.Collector{}
	p, err := New(MaxConnsPerHost(1), MaxIdleConnsPerHost(1), TLSClientConfig(&tls.Config{RootCAs: roots}), WithObserver(col))
	require.NoError(t, err)
	t.Cleanup(p.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, p.Quiesce(ctx))

	tlines := col.Timelines()
	require.Len(t, tlines, 1)
	tl := tlines[0]
	require.Equal(t, "HTTP/2.0", tl.Proto)
	eof := bodyEOF(tl)
	require.GreaterOrEqual(t, eof, time.Duration(0), "an EOF event: %v", tl.Events)

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Len(t, p.conns, 1)
	for _, c := range p.conns {
		require.Equal(t, vocab.StateIdle, c.State)
		require.Equal(t, stamp{tl.Start, eof}.time(), c.idleSince.time(), "idle since the EOF")
	}
}
