package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	stdtrace "net/http/httptrace"
	"slices"
	"testing"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/benchpair"
)

// BenchmarkSequential: one goroutine, one kept-alive connection, GET +
// read to EOF + close, through each client of [Clients]. Compare columns
// with `benchstat -col /client`. Besides time, bytes and allocations per
// request it reports cpu-ns/op (the process's CPU time per request, which
// other load on the machine disturbs less than wall time) and redials. With
// CONNAUDIT_BENCH_URL set ([URLEnv]) the server is another process and the
// allocations are the client's alone.
func BenchmarkSequential(b *testing.B) { benchClients(b, 1) }

// BenchmarkParallel: the same with 4 goroutines sharing a client capped at
// 4 connections (MaxConnsPerHost=4, all of which may stay idle).
func BenchmarkParallel(b *testing.B) { benchClients(b, 4) }

func benchClients(b *testing.B, workers int) {
	target, stop, err := Target()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, name := range Clients {
		b.Run("client="+name, func(b *testing.B) {
			c, err := NewClient(name, workers)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			// Dial outside the measurement.
			if err := Run(c, target, workers, 4*workers); err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodGet, target, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := benchpair.ProcessCPU()
			b.ResetTimer()
			if workers == 1 {
				for b.Loop() {
					if err := c.Get(req); err != nil {
						b.Fatal(err)
					}
				}
			} else if err := Run(c, target, workers, b.N); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(benchpair.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
			// Connections dialed beyond the workers' own: 0 unless the
			// Transport gave a connection up, which net/http does when its
			// write goroutine is not scheduled within 50ms of the
			// response (maxWriteWaitBeforeConnReuse), under heavy load.
			if d := c.Dials(); d >= 0 {
				b.ReportMetric(float64(max(0, d-int64(workers))), "redials")
			}
		})
	}
}

// BenchmarkTracer isolates the tracer's own cost: a fake base RoundTripper
// fires the hooks net/http fires for a request served by an idle HTTP/1
// connection (GetConn, GotConn, WroteHeaders, WroteRequest,
// GotFirstResponseByte, PutIdleConn at body EOF) and returns a 2-byte body,
// allocating nothing itself. No network, no server: the figures are the
// tracer's alone, without the noise of sockets and scheduling.
func BenchmarkTracer(b *testing.B) {
	noop := httptrace.ObserverFunc(func(*httptrace.Timeline) {})
	cases := []struct {
		name string
		rt   func(base http.RoundTripper) (http.RoundTripper, error)
	}{
		{"plain", func(base http.RoundTripper) (http.RoundTripper, error) { return base, nil }},
		{"traced", func(base http.RoundTripper) (http.RoundTripper, error) {
			return httptrace.NewTransport(base, httptrace.WithObserver(noop))
		}},
		// Without the unclosed-body warning (on by default), whose
		// timer and cleanup registration are the difference.
		{"traced-nowarning", func(base http.RoundTripper) (http.RoundTripper, error) {
			return httptrace.NewTransport(base, httptrace.WithObserver(noop), httptrace.UnclosedBodyWarning(0))
		}},
		// With the diagnosis of unclosed bodies: a stack walk and a
		// cleanup registration per request.
		{"traced-stacks", func(base http.RoundTripper) (http.RoundTripper, error) {
			return httptrace.NewTransport(base, httptrace.WithObserver(noop), httptrace.CaptureStacks())
		}},
	}
	for _, c := range cases {
		b.Run("client="+c.name, func(b *testing.B) {
			rt, err := c.rt(&fakeTransport{})
			if err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/ok", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// fakeTransport answers from memory, firing the hooks of a request served
// by an idle HTTP/1 connection. It serves one request at a time and
// allocates nothing.
type fakeTransport struct {
	resp http.Response
	body fakeBody
	conn fakeConn
}

func (f *fakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ct := stdtrace.ContextClientTrace(req.Context())
	if ct != nil {
		if ct.GetConn != nil {
			ct.GetConn("127.0.0.1:1")
		}
		if ct.GotConn != nil {
			ct.GotConn(stdtrace.GotConnInfo{Conn: &f.conn, Reused: true, WasIdle: true})
		}
		if ct.WroteHeaders != nil {
			ct.WroteHeaders()
		}
		if ct.WroteRequest != nil {
			ct.WroteRequest(stdtrace.WroteRequestInfo{})
		}
		if ct.GotFirstResponseByte != nil {
			ct.GotFirstResponseByte()
		}
	}
	f.body = fakeBody{left: len(Payload), trace: ct}
	f.resp = http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		ContentLength: int64(len(Payload)), Body: &f.body, Request: req,
	}
	return &f.resp, nil
}

type fakeBody struct {
	left  int
	trace *stdtrace.ClientTrace
}

func (b *fakeBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// net/http returns the connection to the idle pool before it
		// delivers EOF.
		if b.trace != nil && b.trace.PutIdleConn != nil {
			b.trace.PutIdleConn(nil)
			b.trace = nil
		}
		return 0, io.EOF
	}
	n := copy(p, Payload[len(Payload)-b.left:])
	b.left -= n
	return n, nil
}

func (b *fakeBody) Close() error { return nil }

var (
	fakeLocal  = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	fakeRemote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
)

type fakeConn struct{ net.Conn }

func (*fakeConn) LocalAddr() net.Addr  { return fakeLocal }
func (*fakeConn) RemoteAddr() net.Addr { return fakeRemote }

// BenchmarkPaired measures each client of [Clients] and [Calibration]
// side by side with plain in one process ([benchpair.Run]): batches of the
// two alternate, and it reports both clients' wall and CPU time per request
// and the client's overhead over plain in percent. Load from elsewhere on the
// machine, which shifts separate runs by 10 % or more, falls on both
// clients alike, so a few percent are measurable. Read with
//
//	go test -run '^$' -bench Paired -count 10 . > out.txt
//	benchstat -col /client -filter '.unit:(overhead-% OR cpu-overhead-%)' out.txt
//
// An op is one request through each of the two clients; mode=seq is one
// goroutine, mode=par4 four sharing a client capped at 4 connections.
//
// On a machine of two cores the medians of ten such runs still move by 3–4
// points from run to run: the client, the in-process server and their
// wake-ups share both cores, and how they interleave changes the time of
// every request. With GOMAXPROCS=1 they run in turn, and eight runs resolve
// half a point of a client's own cost (bench/RESULTS.md, the ninth round):
//
//	GOMAXPROCS=1 go test -run '^$' -bench 'Paired/mode=seq' -count 8 .
//
// Those runs resolve one binary, which is one draw of where the linker put
// the code: the same source linked otherwise moves a client's overhead by
// 1–2.7 points (the tenth round). bench/layouts.sh runs this benchmark on
// the linker's own order and on random layouts, and reports both.
func BenchmarkPaired(b *testing.B) {
	target, stop, err := Target()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, mode := range []struct {
		name    string
		workers int
	}{{"seq", 1}, {"par4", 4}} {
		b.Run("mode="+mode.name, func(b *testing.B) {
			for _, name := range slices.Concat(Clients[1:], Calibration) {
				b.Run("client="+name, func(b *testing.B) {
					var run [2]func(int) error
					for i, n := range []string{"plain", name} {
						c, err := NewClient(n, mode.workers)
						if err != nil {
							b.Fatal(err)
						}
						defer c.Close()
						run[i] = func(n int) error { return Run(c, target, mode.workers, n) }
						// Dial outside the measurement.
						if err := run[i](4 * mode.workers); err != nil {
							b.Fatal(err)
						}
					}
					benchpair.Run(b, [2]string{"plain", "client"}, run)
				})
			}
		})
	}
}

// BenchmarkConcurrency measures, paired with plain as [BenchmarkPaired]
// does, the overhead of a few clients with 1, 4, 16 and 64 goroutines
// sharing one client, with as many connections as goroutines, in batches of at least 8
// requests a goroutine: a lock that
// every request of a pool takes in turn would make the overhead grow with
// the goroutines. Read with
//
//	go test -run '^$' -bench Concurrency -count 6 . > out.txt
//	benchstat -col /client -filter '.unit:overhead-%' out.txt
func BenchmarkConcurrency(b *testing.B) {
	target, stop, err := Target()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, workers := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("g=%d", workers), func(b *testing.B) {
			for _, name := range []string{"traced+tracked", "traced", "httpstat", "min-recorder"} {
				b.Run("client="+name, func(b *testing.B) {
					var run [2]func(int) error
					for i, n := range []string{"plain", name} {
						c, err := NewClient(n, workers)
						if err != nil {
							b.Fatal(err)
						}
						defer c.Close()
						run[i] = func(n int) error { return Run(c, target, workers, n) }
						// Dial outside the measurement.
						if err := run[i](4 * workers); err != nil {
							b.Fatal(err)
						}
					}
					benchpair.RunBatches(b, [2]string{"plain", "client"}, run, max(benchpair.Batch, 8*workers))
				})
			}
		})
	}
}

// TestTracedPoolIsSetAsBase: the traced+tracked client's transport is set
// as Base is, so that the benchmarks compare like with like.
func TestTracedPoolIsSetAsBase(t *testing.T) {
	for _, conns := range []int{1, 4} {
		base := Base(conns)
		p, err := TracedPool(conns)
		if err != nil {
			t.Fatal(err)
		}
		tr := p.Transport()
		if tr.MaxConnsPerHost != base.MaxConnsPerHost || tr.MaxIdleConnsPerHost != base.MaxIdleConnsPerHost ||
			tr.IdleConnTimeout != base.IdleConnTimeout || tr.TLSHandshakeTimeout != base.TLSHandshakeTimeout ||
			tr.ForceAttemptHTTP2 != base.ForceAttemptHTTP2 || tr.DisableKeepAlives != base.DisableKeepAlives ||
			(tr.Proxy == nil) != (base.Proxy == nil) || tr.MaxIdleConns != base.MaxIdleConns ||
			tr.ExpectContinueTimeout != base.ExpectContinueTimeout || tr.MaxResponseHeaderBytes != base.MaxResponseHeaderBytes {
			t.Errorf("conns %d: the traced pool's transport differs from Base: %+v", conns, tr)
		}
		p.Close()
	}
}

// TestAllocationsPerRequest: the tracer adds at most 2 allocations to a
// request (its context, with the response body's wrapper, and the
// request's shallow copy that carries it), with a pool's dialer or without
// one, and the pool's tracking adds none: what BenchmarkSequential reports
// with -benchmem, held in a test. Allocations are counted, not timed: a
// kept-alive request allocates the same in every run.
func TestAllocationsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop recycled recorders at random; CI runs this test without it")
	}
	target, stop, err := Target()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	allocs := func(name string) float64 {
		c, err := NewClient(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Dial, and fill the recorders' and the pool's sync.Pools.
		for range 20 {
			if err := c.Get(req); err != nil {
				t.Fatal(err)
			}
		}
		var failed error
		n := testing.AllocsPerRun(1000, func() {
			if err := c.Get(req); err != nil && failed == nil {
				failed = err
			}
		})
		if failed != nil {
			t.Fatal(failed)
		}
		if d := c.Dials(); d != 1 {
			t.Fatalf("%s dialed %d connections, want 1 kept alive", name, d)
		}
		return n
	}
	plain := allocs("plain")
	for _, name := range []string{"traced", "traced+tracked"} {
		if n := allocs(name); n > plain+2 {
			t.Errorf("%s: %v allocations a request, plain %v: want at most 2 more", name, n, plain)
		}
	}
}
