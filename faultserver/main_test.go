package faultserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// start returns a started server closed at the end of the test, where Close
// must report nothing.
func start(t *testing.T, opts ...faultserver.Option) *faultserver.Server {
	t.Helper()
	s, err := faultserver.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// client is a fresh MaxConnsPerHost=1 keep-alive client for s that counts
// its dials; its idle connections are closed at the end of the test, before
// the server.
type client struct {
	*http.Client
	tr    *http.Transport
	dials atomic.Int64
}

func newClient(t *testing.T, s *faultserver.Server, edit ...func(*http.Transport)) *client {
	t.Helper()
	c := &client{}
	d := &net.Dialer{}
	c.tr = &http.Transport{
		MaxConnsPerHost: 1,
		TLSClientConfig: s.ClientTLSConfig(),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}
	for _, e := range edit {
		e(c.tr)
	}
	c.Client = &http.Client{Transport: c.tr}
	t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

// h2 makes a transport attempt HTTP/2.
func h2(tr *http.Transport) { tr.ForceAttemptHTTP2 = true }

// get does a GET and returns the response with its body read and closed.
func (c *client) get(t *testing.T, url string) (*http.Response, string, error) {
	t.Helper()
	// Bounded, so that a fault that never answers fails the test instead
	// of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.getCtx(t, ctx, url)
}

func (c *client) getCtx(t *testing.T, ctx context.Context, url string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}
