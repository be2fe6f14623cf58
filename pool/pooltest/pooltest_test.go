package pooltest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/pool/pooltest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func okServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	return srv
}

func newPool(t *testing.T, opts ...pool.Option) *pool.Pool {
	p, err := pool.New(opts...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func get(t *testing.T, p *pool.Pool, ctx context.Context, url string) *http.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	return resp
}

func TestVerifyNone(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	t.Run("clean", func(t *testing.T) {
		srv := okServer(t)
		p := newPool(t)
		resp := get(t, p, context.Background(), srv.URL)
		_, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		srv.Close()
		pooltest.VerifyNone(t, p, baseline)
	})
	t.Run("leak", func(t *testing.T) {
		srv := okServer(t)
		p := newPool(t, pool.CaptureStacks())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		resp := get(t, p, ctx, srv.URL)
		defer resp.Body.Close()

		rec := &recordingTB{}
		pooltest.VerifyNone(rec, p, baseline)
		require.Len(t, rec.errors, 1)
		msg := rec.errors[0]
		require.Contains(t, msg, "open body: GET "+srv.URL)
		require.NotContains(t, msg, "open for 0s", "a body opened a moment ago is open for some µs")
		require.Contains(t, msg, "TestVerifyNone")
		require.Contains(t, msg, "active connection #1")
		require.Contains(t, msg, "connection held by an unclosed response body")
		require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
		require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).writeLoop)")
		require.Contains(t, msg, "1 × a server connection still open (net/http.(*conn).serve)")
		require.Contains(t, msg, "1 × a server still running (net/http.(*Server).Serve)")
	})
}

// recordingTB records the errors reported to it instead of failing.
type recordingTB struct {
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }
