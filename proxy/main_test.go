package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// start returns a started proxy to upstream, closed at the end of the
// test.
func start(t *testing.T, upstream string, opts ...proxy.Option) *proxy.Proxy {
	t.Helper()
	p, err := proxy.New(upstream, opts...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Close() })
	return p
}

// okUpstream is an upstream that answers "ok" and counts the requests
// it read, and the connections it accepted.
type okUpstream struct {
	*httptest.Server
	requests, conns atomic.Int64
}

func newUpstream(t *testing.T, h http.HandlerFunc) *okUpstream {
	t.Helper()
	u := &okUpstream{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}
	}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h(w, r)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// goClient is a keep-alive Go client that counts its dials.
type goClient struct {
	*http.Client
	tr    *http.Transport
	dials atomic.Int64
}

func newGoClient(t *testing.T, ca []byte) *goClient {
	t.Helper()
	c := &goClient{}
	d := &net.Dialer{}
	c.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}
	if ca != nil {
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(ca))
		c.tr.TLSClientConfig = &tls.Config{RootCAs: roots}
		c.tr.ForceAttemptHTTP2 = true
	}
	c.Client = &http.Client{Transport: c.tr}
	t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

// do sends a request and reads its body whole; it returns the status, or
// the error.
func (c *goClient) do(t *testing.T, method, url string, body io.Reader, header ...string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Bounded(t), method, url, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}
