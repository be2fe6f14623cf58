package testserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

// TestServeOKClosesEveryNth sends 5 requests on a one-connection client to
// a server that closes every 2nd response: connections 1 and 2 serve two
// requests each, connection 3 the fifth.
func TestServeOKClosesEveryNth(t *testing.T) {
	var (
		requests atomic.Int64
		accepted testserver.Counter
	)
	hs := httptest.NewUnstartedServer(nil)
	testserver.ServeOK(hs, 2, &requests, &accepted)
	hs.Start()
	defer hs.Close()
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var closes int
	for range 5 {
		resp, err := c.Get(hs.URL)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, "ok", string(body))
		if resp.Close {
			closes++
		}
	}
	require.Equal(t, 2, closes)
	require.EqualValues(t, 5, requests.Load())
	require.EqualValues(t, 3, accepted.Load())
}
