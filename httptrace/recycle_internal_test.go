package httptrace

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	stdtrace "net/http/httptrace"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closeForRecycle closes resp's body the way body.Close does, and returns
// what the recorder decided: whether no hook of the request could fire any
// more, so that the recorder could serve the next request.
func closeForRecycle(t *testing.T, resp *http.Response) bool {
	t.Helper()
	_, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	b, ok := resp.Body.(*body)
	require.True(t, ok)
	require.NoError(t, b.rc.Close())
	reuse, cancel := b.r.bodyClose(b.gen)
	if cancel != nil {
		cancel(nil)
	}
	return reuse
}

// TestRecycleDecision checks, on real connections, when a recorder is
// recycled: only for an HTTP/1 request served at once by an idle
// connection, with no caller's trace.
func TestRecycleDecision(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := httptest.NewServer(h)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := NewTransport(base)
	require.NoError(t, err)

	get := func(ctx context.Context, url string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		return resp
	}
	ctx := context.Background()
	assert.False(t, closeForRecycle(t, get(ctx, srv.URL)), "the request that dialed: its dial hooks are done, but it dialed")
	assert.True(t, closeForRecycle(t, get(ctx, srv.URL)), "steady state: an idle connection")
	assert.True(t, closeForRecycle(t, get(ctx, srv.URL)), "steady state again")
	composed := stdtrace.WithClientTrace(ctx, &stdtrace.ClientTrace{GotConn: func(stdtrace.GotConnInfo) {}})
	assert.False(t, closeForRecycle(t, get(composed, srv.URL)), "composed with a caller's trace")

	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	base2 := &http.Transport{TLSClientConfig: h2.Client().Transport.(*http.Transport).TLSClientConfig, ForceAttemptHTTP2: true}
	defer base2.CloseIdleConnections()
	tr2, err := NewTransport(base2)
	require.NoError(t, err)
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, h2.URL, nil)
		require.NoError(t, err)
		resp, err := tr2.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, "HTTP/2.0", resp.Proto)
		assert.False(t, closeForRecycle(t, resp), "HTTP/2: hooks come from the connection's goroutines")
	}
}

// TestStaleBodyIdleTimer: the watchdog timer of a request fires just as
// the request ends; its callback, delayed on the recorder's lock, runs only
// after the recorder was recycled and armed for the next request. It must
// not cancel the next request.
func TestStaleBodyIdleTimer(t *testing.T) {
	tr, err := NewTransport(&http.Transport{}, BodyIdleTimeout(time.Hour))
	require.NoError(t, err)
	r := newRecorder(tr)

	r.begin(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/1", nil))
	_, r.cancel = context.WithCancelCause(context.Background())
	r.mu.Lock()
	r.startWatchLocked()
	r.finishLocked(vocab.ClassOK, vocab.StageBody, nil, 0)
	r.mu.Unlock()
	r.reset()

	r.begin(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/2", nil))
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	r.cancel = cancel2
	r.mu.Lock()
	r.startWatchLocked()
	r.mu.Unlock()

	r.bodyIdleFired() // request 1's callback, late
	assert.NoError(t, ctx2.Err(), "a stale watchdog callback cancelled the next request")

	r.mu.Lock()
	r.stopWatchLocked()
	r.mu.Unlock()
}
