package promconnaudit_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// bounded returns a context that ends after testkit.WaitBound or with the test.
func bounded(t *testing.T) context.Context { return testkit.Bounded(t) }

// faultRun sends 20 requests with faults through a new pool — 5 bodies
// closed early, a "Connection: close", a hidden retry — then holds one
// body open if hold, else sends one more request and lets the server
// close its idle connection, and returns the pool.
func faultRun(t *testing.T, hold bool) *pool.Pool {
	t.Helper()
	srv, err := faultserver.New()
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	srv.Handle("/ok", faultserver.OK{})
	srv.Handle("/large", faultserver.LargeBody{Size: 1 << 20})
	srv.Handle("/close", faultserver.ConnectionClose{})
	srv.Handle("/retry", faultserver.CloseBeforeResponse{After: 1})
	p, err := pool.New(pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx := bounded(t)
	get := func(path string, n int64) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+path, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req)
		require.NoError(t, err)
		if n == 0 {
			return resp
		}
		if n < 0 {
			_, err = io.Copy(io.Discard, resp.Body)
		} else {
			_, err = io.CopyN(io.Discard, resp.Body, n)
		}
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return nil
	}
	for i := range 20 {
		switch {
		case i%4 == 3:
			get("/large", 10)
		case i == 9:
			get("/close", -1)
		case i == 12, i == 13:
			get("/retry", -1)
		default:
			get("/ok", -1)
		}
	}
	require.NoError(t, p.Quiesce(ctx))
	if hold {
		resp := get("/ok", 0)
		t.Cleanup(func() { resp.Body.Close() })
		return p
	}
	get("/ok", -1) // an idle connection, which the server closes
	require.NoError(t, p.Quiesce(ctx))
	srv.CloseClientConnections()
	require.NoError(t, p.WaitFor(ctx, func(s pool.Stats) bool { return s.Open == 0 && s.Dialing == 0 }))
	return p
}
