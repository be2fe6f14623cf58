package pool_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

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
	target := benchpair.Target(b)
	for _, mode := range benchModes {
		b.Run("mode="+mode.name, func(b *testing.B) {
			b.Run("client=plain", func(b *testing.B) {
				tr, dials := plainTransport(mode.workers)
				defer tr.CloseIdleConnections()
				benchClient(b, &http.Client{Transport: tr}, target, mode.workers)
				b.ReportMetric(float64(max(0, dials.Load()-int64(mode.workers))), "redials")
			})
			b.Run("client=traced+tracked", func(b *testing.B) {
				p, err := tracedPool(mode.workers)
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

// benchModes are the two shapes of load the overhead benchmarks measure:
// one goroutine on one connection, and 4 goroutines sharing a client
// capped at 4 connections.
var benchModes = []struct {
	name    string
	workers int
}{{"seq", 1}, {"par4", 4}}

// tracedPool is pool.New's pool capped at conns connections per host, all
// of which may stay idle: plainTransport's settings, so that the two
// differ only in the tracing and tracking (TestPairedSettingsEqual).
// pool.New keeps http.DefaultTransport's 2 idle connections per host,
// which under 4 workers closes and redials connections.
func tracedPool(conns int) (*pool.Pool, error) {
	return pool.New(pool.MaxConnsPerHost(conns), pool.MaxIdleConnsPerHost(conns))
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
	run := driver(b, c, target, workers)
	// Open the connections outside the measurement.
	if err := run(4 * workers); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := benchpair.ProcessCPU()
	b.ResetTimer()
	if err := run(b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(benchpair.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// driver returns a function that sends n requests to target through c from
// workers goroutines (from the calling goroutine when workers is 1), each
// a GET whose body is read to EOF and closed.
func driver(b *testing.B, c *http.Client, target string, workers int) func(n int) error {
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
	return func(n int) error {
		if workers == 1 {
			for range n {
				if err := do(reqs[0]); err != nil {
					return err
				}
			}
			return nil
		}
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
}

// BenchmarkOverheadPaired measures the same as [BenchmarkOverhead], plain
// against traced+tracked, side by side in one process ([benchpair.Run]):
// batches of the two clients alternate, and it reports each client's wall
// and CPU time per request and the traced client's overhead in percent.
// Other load on the machine, which shifts separate runs by 10 % or more,
// falls on both clients alike. Read the overhead's median and confidence
// interval with
//
//	go test -run '^$' -bench OverheadPaired -count 10 ./pool > out.txt
//	benchstat out.txt
//
// An op is one request through each client. CONNAUDIT_BENCH_URL applies as
// for BenchmarkOverhead.
func BenchmarkOverheadPaired(b *testing.B) {
	target := benchpair.Target(b)
	for _, mode := range benchModes {
		b.Run("mode="+mode.name, func(b *testing.B) {
			tr, _ := plainTransport(mode.workers)
			defer tr.CloseIdleConnections()
			p, err := tracedPool(mode.workers)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			clients := [2]func(int) error{
				driver(b, &http.Client{Transport: tr}, target, mode.workers),
				driver(b, p.Client(), target, mode.workers),
			}
			for i := range clients { // dial outside the measurement
				if err := clients[i](4 * mode.workers); err != nil {
					b.Fatal(err)
				}
			}
			benchpair.Run(b, [2]string{"plain", "traced"}, clients)
		})
	}
}

// TestPairedSettingsEqual: the paired benchmarks compare like with like,
// the traced pool's transport set as the plain one is, field by field.
func TestPairedSettingsEqual(t *testing.T) {
	for _, mode := range benchModes {
		plain, _ := plainTransport(mode.workers)
		p, err := tracedPool(mode.workers)
		require.NoError(t, err)
		tr := p.Transport()
		for name, pair := range map[string][2]any{
			"MaxConnsPerHost":     {plain.MaxConnsPerHost, tr.MaxConnsPerHost},
			"MaxIdleConnsPerHost": {plain.MaxIdleConnsPerHost, tr.MaxIdleConnsPerHost},
			"IdleConnTimeout":     {plain.IdleConnTimeout, tr.IdleConnTimeout},
			"TLSHandshakeTimeout": {plain.TLSHandshakeTimeout, tr.TLSHandshakeTimeout},
			"ForceAttemptHTTP2":   {plain.ForceAttemptHTTP2, tr.ForceAttemptHTTP2},
			"DisableKeepAlives":   {plain.DisableKeepAlives, tr.DisableKeepAlives},
		} {
			require.Equal(t, pair[0], pair[1], "%s, mode %s", name, mode.name)
		}
		p.Close()
	}
}
