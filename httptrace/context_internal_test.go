package httptrace

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// TestHookContext checks that an observer of the module's own finds the
// caller's request context through hook.Context while it observes the
// request's timeline, and that a clone keeps none.
func TestHookContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var seen []any
	var clone *Timeline
	tr, err := NewTransport(base, WithObserver(ObserverFunc(func(tl *Timeline) {
		seen = append(seen, hook.Context(tl).Value(ctxKey{}))
		clone = tl.Clone()
	})))
	require.NoError(t, err)
	for i := range 2 {
		ctx := context.WithValue(t.Context(), ctxKey{}, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	require.Equal(t, []any{0, 1}, seen)
	require.Nil(t, hook.Context(clone))
}
