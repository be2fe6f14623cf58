package pool_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

func TestHandler(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	for range 2 {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	held := open(t, p, bounded(t), srv.URL+"/held?token=secret")
	defer held.Body.Close()
	quiesce(t, p)
	h := p.Handler()

	t.Run("json", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var snap pool.Snapshot
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &snap))
		require.EqualValues(t, 1, snap.Total.Dials)
		require.EqualValues(t, 3, snap.Total.Requests)
		require.EqualValues(t, 2, snap.Total.ReusedRequests)
		require.Equal(t, 1, snap.Total.Active)
		require.Len(t, snap.Hosts, 1)
		require.Len(t, snap.Conns, 1)
		require.Equal(t, pool.StateActive, snap.Conns[0].State)
		require.Equal(t, 3, snap.Conns[0].Requests)
		require.Len(t, snap.OpenBodies, 1)
		require.Equal(t, snap.Conns[0].ID, snap.OpenBodies[0].Conn)
		require.NotContains(t, rec.Body.String(), "secret", "URLs are redacted")
		require.Contains(t, snap.OpenBodies[0].URL, "token=REDACTED")
	})
	t.Run("text", func(t *testing.T) {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/debug/connpool?format=text", nil),
			func() *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/debug/connpool", nil)
				r.Header.Set("Accept", "text/plain")
				return r
			}(),
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code)
			require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain"))
			out := rec.Body.String()
			require.Contains(t, out, "HOST")
			require.Contains(t, out, "total")
			require.Contains(t, out, srv.Listener.Addr().String())
			require.Contains(t, out, "#1")
			require.Contains(t, out, "active")
			require.Contains(t, out, "OPEN BODY")
			require.NotContains(t, out, "secret")
		}
	})
	require.NoError(t, held.Body.Close())
	quiesce(t, p)
}

var expvarSeq atomic.Int64

func TestPublish(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)

	// expvar names live as long as the process: unique per run (-count).
	name := fmt.Sprintf("connaudit_pool_test_%d", expvarSeq.Add(1))
	require.NoError(t, p.Publish(name))
	v := expvar.Get(name)
	require.NotNil(t, v)
	var snap pool.Snapshot
	require.NoError(t, json.Unmarshal([]byte(v.String()), &snap))
	require.EqualValues(t, 1, snap.Total.Dials)
	require.Len(t, snap.Conns, 1)

	err := p.Publish(name)
	require.Error(t, err)
	require.Contains(t, err.Error(), name)
	require.Error(t, p.Publish(""))
}

// TestPublishConcurrently: two calls that publish one name at once get one
// success and one error, not expvar's panic.
func TestPublishConcurrently(t *testing.T) {
	p := newPool(t)
	name := fmt.Sprintf("connaudit_pool_test_%d", expvarSeq.Add(1))
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- p.Publish(name) }()
	}
	var failed int
	for range 2 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	require.Equal(t, 1, failed)
}

// TestSnapshotIsOneInstant takes snapshots while requests run, some bodies
// closed early, some left open a while: each snapshot's parts agree with
// each other, as they do only if taken at one instant.
func TestSnapshotIsOneInstant(t *testing.T) {
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(make([]byte, 64<<10))
	}))
	p := newPool(t, pool.MaxConnsPerHost(4))
	const workers, each = 8, 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				resp := open(t, p, bounded(t), srv.URL)
				if (w+i)%3 == 0 {
					resp.Body.Close() // early: the connection is closed
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	check := func(s pool.Snapshot) {
		t.Helper()
		require.NoError(t, s.Total.Check())
		require.Equal(t, s.Total.OpenBodies, len(s.OpenBodies), "open bodies")
		var dials, requests int64
		for _, h := range s.Hosts {
			dials += int64(h.Dials)
			requests += h.Requests
		}
		require.Equal(t, int64(s.Total.Dials), dials, "dials")
		require.Equal(t, s.Total.Requests, requests, "requests")
		open := 0
		for _, c := range s.Conns {
			if c.State == pool.StateIdle || c.State == pool.StateActive {
				open++
			}
		}
		require.Equal(t, s.Total.Open, open, "open connections")
	}
	snaps := 0
	for {
		select {
		case <-done:
			quiesce(t, p)
			check(p.Snapshot())
			require.Positive(t, snaps)
			return
		default:
			check(p.Snapshot())
			snaps++
		}
	}
}
