//go:build unix

package pool_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/pool"
)

// benchURLEnv points BenchmarkOverhead at a server in another process
// (bench/cmd/okserver), so that its allocations are the client's alone. It
// must be an http URL on a loopback address.
const benchURLEnv = "CONNAUDIT_BENCH_URL"

// BenchmarkOverhead measures what auditing costs a service in its steady
// state — GET, body read to EOF and closed, on kept-alive connections —
// sequentially (mode=seq: one goroutine, one connection) and in parallel
// (mode=par4: 4 goroutines sharing a client capped at MaxConnsPerHost=4).
// client=plain is an http.Transport set like the one pool.New builds
// (90 s idle timeout, all connections may stay idle); client=traced+tracked
// is pool.New's client: the tracer and the connection tracking. Compare
// them with
//
//	go test -run '^$' -bench Overhead -count 10 -benchmem ./pool > out.txt
//	benchstat -col /client out.txt
//
// Besides wall time per request it reports cpu-ns/op, the process's CPU
// time (user + system, client and in-process server) per request, which
// other load on the machine disturbs less. With CONNAUDIT_BENCH_URL set
// (say http://127.0.0.1:PORT/ok, served by bench/cmd/okserver) the requests
// go there instead of to an in-process server, and allocations and CPU
// time are the client's alone.
func BenchmarkOverhead(b *testing.B) {
	target := os.Getenv(benchURLEnv)
	if target != "" {
		if err := checkLoopbackURL(target); err != nil {
			b.Fatalf("%s: %v", benchURLEnv, err)
		}
	} else {
		srv := httptest.NewServer(okHandler)
		defer srv.Close()
		target = srv.URL + "/ok"
	}
	for _, mode := range []struct {
		name    string
		workers int
	}{{"seq", 1}, {"par4", 4}} {
		b.Run("mode="+mode.name, func(b *testing.B) {
			b.Run("client=plain", func(b *testing.B) {
				tr, dials := plainTransport(mode.workers)
				defer tr.CloseIdleConnections()
				benchClient(b, &http.Client{Transport: tr}, target, mode.workers)
				b.ReportMetric(float64(max(0, dials.Load()-int64(mode.workers))), "redials")
			})
			b.Run("client=traced+tracked", func(b *testing.B) {
				p, err := pool.New(pool.MaxConnsPerHost(mode.workers))
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				benchClient(b, p.Client(), target, mode.workers)
				// Connections dialed beyond the workers' own: 0 unless the
				// Transport gave one up, as net/http does when its write
				// goroutine is not scheduled within 50ms of the response
				// (under heavy load).
				b.ReportMetric(float64(max(0, p.Stats().Dials-int64(mode.workers))), "redials")
			})
		})
	}
}

// plainTransport is set like pool.New's transport, without the tracking;
// it counts its dials.
func plainTransport(conns int) (*http.Transport, *atomic.Int64) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dials := new(atomic.Int64)
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:   true,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}, dials
}

// benchClient sends b.N requests to target through c from workers
// goroutines.
func benchClient(b *testing.B, c *http.Client, target string, workers int) {
	reqs := make([]*http.Request, workers)
	for i := range reqs {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = req
	}
	do := func(req *http.Request) error {
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	// Open the connections outside the measurement.
	run := func(n int) error {
		var (
			next  atomic.Int64
			wg    sync.WaitGroup
			first atomic.Value
		)
		for _, req := range reqs {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if err := do(req); err != nil {
						first.CompareAndSwap(nil, err)
						return
					}
				}
			})
		}
		wg.Wait()
		err, _ := first.Load().(error)
		return err
	}
	if err := run(4 * workers); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := processCPU()
	b.ResetTimer()
	if workers == 1 {
		for b.Loop() {
			if err := do(reqs[0]); err != nil {
				b.Fatal(err)
			}
		}
	} else if err := run(b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the CPU time (user and system) this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkLoopbackURL accepts only http URLs on loopback addresses.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return &url.Error{Op: "bench", URL: raw, Err: errNotLoopback}
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return &url.Error{Op: "bench", URL: raw, Err: errNotLoopback}
		}
	}
	return nil
}

var errNotLoopback = errors.New("want an http URL on a loopback address")
