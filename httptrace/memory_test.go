package httptrace_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
)

// memoryRequests is the number of requests TestMemoryHeldAfterClose sends
// per case. The default keeps the ordinary test run fast; the figure worth
// reporting comes from
//
//	go test -run TestMemoryHeldAfterClose -v ./httptrace -memory.requests=1000000
var memoryRequests = flag.Int("memory.requests", 2000, "requests sent by TestMemoryHeldAfterClose per case")

// memoryBound is how much more heap may be in use after the run than
// before it.
const memoryBound = 1 << 20

// TestMemoryHeldAfterClose: a service traces many requests through the
// wrapper, with the slog observer (JSON handler, level enabled, to a sink)
// — GET, body read to EOF and closed, on one kept-alive connection. Once
// each body is closed nothing of its request may stay reachable: the heap
// in use after the run (after garbage collection) is within 1 MiB of the
// heap in use before it, whatever the number of requests.
func TestMemoryHeldAfterClose(t *testing.T) {
	n := *memoryRequests
	require.Positive(t, n, "-memory.requests")
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	for _, tc := range []struct {
		name      string
		dialHooks bool
	}{
		{name: "slog"},
		// The pool's set-up: DNS and connect hooks in the dialer.
		{name: "slog+dialhooks", dialHooks: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines lineCounter
			logger := slog.New(slog.NewJSONHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
			base := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}
			defer base.CloseIdleConnections()
			obs, err := httptrace.NewSlogObserver(logger, slog.LevelInfo, slog.LevelWarn)
			require.NoError(t, err)
			tr, err := httptrace.NewTransport(base, httptrace.WithObserver(obs))
			require.NoError(t, err)
			if tc.dialHooks {
				withDialerHooks(base, tr)
			}
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/ok", nil)
			require.NoError(t, err)
			get := func() {
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				_, err = io.Copy(io.Discard, resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
			}

			// Warm up: the connection, the server's and the Transport's
			// buffers, the recorder pool.
			const warmup = 100
			for range warmup {
				get()
			}
			before := heapAfterGC()
			start := time.Now()
			for range n {
				get()
			}
			elapsed := time.Since(start)
			after := heapAfterGC()

			require.EqualValues(t, warmup+n, lines.n.Load(), "one log record per request")
			grew := int64(after.HeapInuse) - int64(before.HeapInuse)
			t.Logf("%d requests in %v (%v per request): heap in use %s before, %s after (%+.1f KiB), %d → %d heap objects",
				n, elapsed.Round(time.Millisecond), (elapsed / time.Duration(n)).Round(10*time.Nanosecond),
				mib(before.HeapInuse), mib(after.HeapInuse), float64(grew)/1024, before.HeapObjects, after.HeapObjects)
			require.LessOrEqualf(t, grew, int64(memoryBound),
				"heap in use grew by %d bytes over %d requests: something keeps per-request state", grew, n)
		})
	}
}

// heapAfterGC returns the memory statistics after two collections (the
// second frees what the first's sync.Pool victim cache still held).
func heapAfterGC() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

func mib(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// lineCounter discards what is written to it and counts the lines.
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}
