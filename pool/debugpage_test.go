package pool_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/pool"
)

// page returns the pool's debug page as text, and as JSON.
func page(t *testing.T, p *pool.Pool) (string, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=text", nil))
	text := rec.Body.String()
	rec = httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool", nil))
	return text, rec.Body.Bytes()
}

// TestDebugPageSaysWhatItCounts: the text page begins with the pool's caps
// and timeouts; it says what WAITS counts, with a cap and without (not
// database/sql's WaitCount, which counts only waits at a cap); an open
// body with no site says how to record one; the prose fits 100 columns.
// The JSON has the settings and each histogram bucket with its bound.
func TestDebugPageSaysWhatItCounts(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)

	capped := newPool(t, pool.MaxConnsPerHost(4), pool.ResponseHeaderTimeout(5*time.Second))
	require.Equal(t, "ok", get(t, capped, srv.URL))
	quiesce(t, capped)
	text, js := page(t, capped)
	require.True(t, strings.HasPrefix(text, "pool: MaxConnsPerHost 4, MaxIdleConns 100, MaxIdleConnsPerHost "), text)
	flat := strings.ReplaceAll(text, "\n    ", " ")
	for _, want := range []string{"ResponseHeaderTimeout 5s", "TLSHandshakeTimeout 10s", "ConnectTimeout 30s",
		"IdleConnTimeout 1m30s", "BodyIdleTimeout none", "UnclosedBodyWarning 1m0s", "CaptureStacks off",
		"WAITS: the requests not handed an idle connection at once: each waited for a dial",
		"or for a connection in use, at MaxConnsPerHost; database/sql's WaitCount counts only the waits at its cap, the second kind"} {
		require.Contains(t, flat, want, text)
	}
	var snap struct {
		Settings map[string]any `json:"settings"`
		Total    struct {
			Waits struct {
				Count   int64            `json:"count"`
				Buckets []map[string]any `json:"buckets"`
			} `json:"waits"`
		} `json:"total"`
	}
	require.NoError(t, json.Unmarshal(js, &snap))
	require.EqualValues(t, 4, snap.Settings["max_conns_per_host"])
	require.EqualValues(t, 5*time.Second, snap.Settings["response_header_timeout_ns"])
	require.EqualValues(t, 1, snap.Total.Waits.Count, "the first request waited for its dial")
	buckets := snap.Total.Waits.Buckets
	require.Len(t, buckets, len(pool.DurationBuckets())+1)
	require.EqualValues(t, 25*time.Microsecond, buckets[0]["le_ns"])
	require.EqualValues(t, 10*time.Second, buckets[len(buckets)-2]["le_ns"])
	require.Contains(t, buckets[len(buckets)-1], "le_ns")
	require.Nil(t, buckets[len(buckets)-1]["le_ns"], "the last bucket has no bound")
	var back pool.Snapshot
	require.NoError(t, json.Unmarshal(js, &back), "the JSON reads back")
	require.Equal(t, capped.Snapshot().Total.Waits, back.Total.Waits)

	// Tracked with a dial function of its own, no cap, a body open.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	own := newTrack(t, &http.Transport{DialContext: dial})
	held := open(t, own, bounded(t), srv.URL)
	defer held.Body.Close()
	quiesce(t, own)
	text, _ = page(t, own)
	flat = strings.ReplaceAll(text, "\n    ", " ")
	for _, want := range []string{"pool: MaxConnsPerHost none, MaxIdleConns no limit, MaxIdleConnsPerHost 2 (net/http's default),",
		"ConnectTimeout the caller's own dial function's", "ResponseHeaderTimeout none",
		"WAITS: the requests not handed an idle connection at once: with no MaxConnsPerHost, each waited for a dial",
		"never for a cap; database/sql's WaitCount, which counts only the waits at its cap, would count none of them",
		"SITE -: pool.CaptureStacks() records where each request is made"} {
		require.Contains(t, flat, want, text)
	}
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, "  ") || strings.HasPrefix(l, "    ") { // prose, not a table's row
			require.LessOrEqual(t, len([]rune(l)), 100, "%q", l)
		}
	}
	require.NoError(t, held.Body.Close())
	quiesce(t, own)

	stacks := newPool(t, pool.CaptureStacks())
	held = open(t, stacks, bounded(t), srv.URL)
	defer held.Body.Close()
	quiesce(t, stacks)
	text, _ = page(t, stacks)
	require.Contains(t, text, "CaptureStacks on")
	require.NotContains(t, text, "SITE -:", "the site is known")
	require.NoError(t, held.Body.Close())
	quiesce(t, stacks)
}

func newTrack(t *testing.T, tr *http.Transport, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.Track(tr, opts...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}
