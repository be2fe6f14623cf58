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
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
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
		require.Equal(t, vocab.StateActive, snap.Conns[0].State)
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
	t.Run("html", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=html", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
		out := rec.Body.String()
		require.Equal(t, 1, strings.Count(out, `<g class="lane`), "a lane per connection")
		require.Contains(t, out, `data-conn="1"`)
		require.Equal(t, 3, strings.Count(out, `<g class="req`), "a bar per stretch active: three requests, one after another")
		require.Contains(t, out, "<tspan> open</tspan>")
		require.NotContains(t, out, "<script")
	})
	require.NoError(t, held.Body.Close())
	quiesce(t, p)
}

// TestWriteTextDurationColumns: the WAIT TIME column writes every row in
// milliseconds, from none to hours, and the AGE column every open body in
// seconds, each right-aligned: the times end in one column.
func TestWriteTextDurationColumns(t *testing.T) {
	s := pool.Snapshot{
		Hosts: map[string]pool.Stats{
			"a.test:80":  {WaitCount: 0},
			"b.test:80":  {WaitCount: 3, WaitDuration: 250 * time.Microsecond},
			"c.test:443": {WaitCount: 9, WaitDuration: 1234567 * time.Microsecond},
		},
		Total: pool.Stats{WaitCount: 12, WaitDuration: 2*time.Hour + 1234817*time.Microsecond},
		OpenBodies: []pool.OpenBody{
			{Timeline: 1, Method: "GET", URL: "http://a.test/x", Conn: 1, Age: 0},
			{Timeline: 2, Method: "GET", URL: "http://b.test/x", Conn: 2, Age: 1500 * time.Millisecond},
			{Timeline: 3, Method: "GET", URL: "http://c.test/x", Conn: 3, Age: 2*time.Minute + 3*time.Second},
			{Timeline: 4, Method: "GET", URL: "http://c.test/y", Conn: 4, Age: 5 * time.Hour},
		},
	}
	var b strings.Builder
	require.NoError(t, s.WriteText(&b, false))
	out := b.String()
	lines := strings.Split(out, "\n")
	line := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, out)
		return ""
	}
	// endOf returns the column just past cell in the line that starts
	// with prefix.
	endOf := func(prefix, cell string) int {
		l := line(prefix) + " " // the last cell is followed by nothing
		i := strings.Index(l, " "+cell+" ")
		require.GreaterOrEqual(t, i, 0, "%q in %q", cell, l)
		return i + 1 + len(cell)
	}
	header := line("HOST")
	waitStart := strings.Index(header, "WAIT TIME")
	ends := map[string]int{
		"a.test:80":  endOf("a.test:80", "0.000ms"),
		"b.test:80":  endOf("b.test:80", "0.250ms"),
		"c.test:443": endOf("c.test:443", "1234.567ms"),
		"total":      endOf("total", "7201234.817ms"),
	}
	for name, end := range ends {
		require.Equal(t, ends["total"], end, "%s: WAIT TIME right-aligned:\n%s", name, out)
	}
	require.Equal(t, waitStart+len("7201234.817ms"), ends["total"], "the widest time starts under the header:\n%s", out)

	ageHeader := line("OPEN BODY")
	ageEnd := strings.Index(ageHeader, "AGE") + len("AGE")
	ageEnds := []int{
		endOf("1 ", "0.000s"), endOf("2 ", "1.500s"), endOf("3 ", "123.000s"), endOf("4 ", "18000.000s"),
	}
	for _, end := range ageEnds {
		require.Equal(t, ageEnds[3], end, "AGE right-aligned:\n%s", out)
	}
	require.Greater(t, ageEnds[3], ageEnd)
	for _, unit := range []string{"µs", "m3s", "h0m", " 0s"} {
		require.NotContains(t, out, unit, "one unit per column")
	}
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
			if c.State == vocab.StateIdle || c.State == vocab.StateActive {
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
