package benchpair_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/stretchr/testify/require"
)

// TestCheckLoopback accepts http URLs on loopback hosts only.
func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/ok", "http://[::1]:80/", "http://localhost:1/x", "http://127.9.9.9/"} {
		require.NoError(t, benchpair.CheckLoopback(ok), ok)
	}
	for _, bad := range []string{"https://127.0.0.1/", "http://example.com/", "http://10.0.0.1/", "http://%zz", "127.0.0.1:80", ""} {
		require.Error(t, benchpair.CheckLoopback(bad), bad)
	}
}

// TestTarget: with no URL in the environment, an in-process server that
// answers "ok"; a URL in it is used as it is.
func TestTarget(t *testing.T) {
	t.Setenv(benchpair.URLEnv, "")
	target := benchpair.Target(t)
	resp, err := http.Get(target)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "ok", string(body))
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	t.Setenv(benchpair.URLEnv, "http://127.0.0.1:9/ok")
	require.Equal(t, "http://127.0.0.1:9/ok", benchpair.Target(t))
}
