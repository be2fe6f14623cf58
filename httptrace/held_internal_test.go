package httptrace

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// armed returns the number of recorders of t whose unclosed-body warning
// timer is armed.
func armed(t *Transport) int {
	t.held.mu.Lock()
	defer t.held.mu.Unlock()
	return len(t.held.armed)
}

// failing is a base RoundTripper whose requests all fail.
type failing struct{}

func (failing) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("refused")
}

// TestHeldTimersOnlyOfRecycledRecorders: the unclosed-body warning leaves
// a timer armed only on a recorder that goes back to be recycled, not on
// the recorders of requests that dialed, failed or went over HTTP/2, which
// are dropped: an armed timer of each would pile up, one per request. (A
// recycled recorder that the sync.Pool drops keeps its timer until it
// fires, which then finds it gone: the race detector's sync.Pool drops
// some at random, so this test counts none of those.)
func TestHeldTimersOnlyOfRecycledRecorders(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	get := func(tr *Transport, url string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	tr, err := NewTransport(base)
	require.NoError(t, err)
	for range 20 {
		get(tr, srv.URL) // each dials
	}
	require.Zero(t, armed(tr), "requests that dialed")

	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	h2base := h2.Client().Transport.(*http.Transport)
	defer h2base.CloseIdleConnections()
	tr2, err := NewTransport(h2base)
	require.NoError(t, err)
	for range 20 {
		get(tr2, h2.URL)
	}
	require.Zero(t, armed(tr2), "HTTP/2 requests")

	bad, err := NewTransport(failing{})
	require.NoError(t, err)
	for range 20 {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
		require.NoError(t, err)
		_, err = bad.RoundTrip(req)
		require.Error(t, err)
	}
	require.Zero(t, armed(bad), "failed requests")
}
