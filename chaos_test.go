package connaudit_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var (
	chaosRequests = flag.Int("chaos.requests", 2000, "requests TestChaosSoak sends, shared by its four sub-runs")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "seed of TestChaosSoak's plan of faults and client behaviours (0: from the clock)")
)

const (
	chaosWorkers = 8
	// chaosBound is both the deadline of a /hang request and the pool's
	// body idle bound: short, so that the soak is fast.
	chaosBound = 100 * time.Millisecond
	// chaosGuard bounds every other request: one that needs it is a
	// request nothing else bounded, and a failure.
	chaosGuard = 10 * time.Second
	// chaosHeapSlack is how far heap in use may end above where it began.
	chaosHeapSlack = 2 << 20
)

// behaviour is what the client does with a request and its response.
type behaviour int

const (
	readAll       behaviour = iota // read the body to its end, close it
	closeUnread                    // close the body without reading it
	readSome                       // read 10 bytes, close
	hangDeadline                   // a chaosBound deadline on the request; read all
	cancelMidBody                  // read 1 byte, cancel, read on, close
)

var behaviourNames = [...]string{"read-all", "close-unread", "read-some", "deadline", "cancel-mid-body"}

func (b behaviour) String() string { return behaviourNames[b] }

// chaosFault is a path of the soak's fault server, how often the plan
// draws it, and the client behaviour it imposes (-1: drawn at random).
type chaosFault struct {
	path   string
	fault  faultserver.Fault // nil: no handler, the server answers 404
	weight int
	only   behaviour
}

var chaosFaults = []chaosFault{
	{"/ok", faultserver.OK{}, 30, -1},
	{"/503", faultserver.Status{Code: 503}, 8, -1},
	{"/404", nil, 4, -1},
	{"/close-before", faultserver.CloseBeforeResponse{}, 6, -1},
	{"/reset", faultserver.Reset{}, 6, -1},
	{"/close-mid", faultserver.CloseMidBody{Length: 1000, Send: 100}, 6, -1},
	{"/stall", faultserver.StallMidBody{Length: 1000, Send: 100}, 2, -1},
	{"/trickle", faultserver.Trickle{Bytes: 4, Interval: 10 * time.Millisecond}, 2, -1},
	{"/early", faultserver.LargeBody{Size: 256 << 10}, 6, readSome},
	{"/hang", faultserver.Hang{}, 2, hangDeadline},
	{"/cancel", faultserver.StallMidBody{Length: 1000, Send: 100}, 4, cancelMidBody},
	{"/connclose", faultserver.ConnectionClose{}, 6, -1},
	{"/close-after-3", faultserver.CloseBeforeResponse{After: 2}, 6, -1},
}

// chaosReq is one request of the plan.
type chaosReq struct {
	fault int // index in chaosFaults
	b     behaviour
}

// chaosPlan draws n requests from the catalogue with r.
func chaosPlan(r *rand.Rand, n int) []chaosReq {
	total := 0
	for _, f := range chaosFaults {
		total += f.weight
	}
	plan := make([]chaosReq, n)
	for i := range plan {
		w := r.IntN(total)
		k := 0
		for w >= chaosFaults[k].weight {
			w -= chaosFaults[k].weight
			k++
		}
		b := chaosFaults[k].only
		if b < 0 {
			switch x := r.IntN(100); {
			case x < 70:
				b = readAll
			case x < 85:
				b = closeUnread
			default:
				b = readSome
			}
		}
		plan[i] = chaosReq{fault: k, b: b}
	}
	return plan
}

// ownClasses are the outcomes a request may have because of its own fault
// and behaviour.
func ownClasses(path string, b behaviour, h2 bool) []httptrace.Class {
	switch path {
	case "/hang":
		return []httptrace.Class{vocab.ClassDeadline}
	case "/cancel":
		return []httptrace.Class{vocab.ClassCanceled}
	case "/close-before":
		return []httptrace.Class{vocab.ClassServerClosed}
	case "/reset":
		if h2 {
			return []httptrace.Class{vocab.ClassStreamReset}
		}
		return []httptrace.Class{vocab.ClassReset}
	case "/close-mid":
		if b != readAll {
			return []httptrace.Class{vocab.ClassOK}
		}
		if h2 {
			return []httptrace.Class{vocab.ClassStreamReset}
		}
		return []httptrace.Class{vocab.ClassBodyTruncated}
	case "/stall":
		if b == readAll {
			return []httptrace.Class{vocab.ClassBodyIdleTimeout}
		}
		return []httptrace.Class{vocab.ClassOK}
	case "/close-after-3":
		if h2 {
			// The third request on a connection half-closes it.
			return []httptrace.Class{vocab.ClassOK, vocab.ClassServerClosed}
		}
		// HTTP/1: the Transport replays it on another connection.
		return []httptrace.Class{vocab.ClassOK}
	}
	return []httptrace.Class{vocab.ClassOK}
}

// collateral reports whether a request may have ended as tl did because of
// something other than its own fault:
//   - body-idle-timeout: a body that made no progress for chaosBound
//     because its reader was not scheduled (2 cores, -race, 8 workers);
//   - HTTP/2: another stream's fault that ends the whole connection
//     (/close-before and /close-after-3 half-close the TCP connection),
//     which ends every stream on it, awaiting headers or reading a body:
//     an EOF, a reset, a GOAWAY (/connclose) followed by the close, or,
//     when the client's write on the dead connection
//     failed first, the http2 client closing the connection itself.
func collateral(h2 bool, tl *httptrace.Timeline) bool {
	switch tl.Outcome.Class {
	case vocab.ClassBodyIdleTimeout:
		return true
	case vocab.ClassServerClosed, vocab.ClassBodyTruncated, vocab.ClassReset, vocab.ClassGoAway:
		return h2
	case vocab.ClassError:
		return h2 && tl.Outcome.Err != nil && strings.Contains(tl.Outcome.Err.Error(), "http2: client connection")
	}
	return false
}

// chaosTally is what a soak observed.
type chaosTally struct {
	requests   int
	byPath     map[string]int
	byClass    map[httptrace.Class]int
	collateral map[string]int // "path → class" outside the request's own classes
	late       int
	dials      int64
	dialErrs   int64
	accepted   int64
	serverRead int64
	closedBy   map[pool.CloseReason]int64
	peakG      int
	samples    int
}

func newTally() *chaosTally {
	return &chaosTally{byPath: map[string]int{}, byClass: map[httptrace.Class]int{}, collateral: map[string]int{},
		closedBy: map[pool.CloseReason]int64{}}
}

func (t *chaosTally) add(o *chaosTally) {
	t.requests += o.requests
	t.late += o.late
	t.dials += o.dials
	t.dialErrs += o.dialErrs
	t.accepted += o.accepted
	t.serverRead += o.serverRead
	t.peakG = max(t.peakG, o.peakG)
	t.samples += o.samples
	for k, v := range o.byPath {
		t.byPath[k] += v
	}
	for k, v := range o.byClass {
		t.byClass[k] += v
	}
	for k, v := range o.collateral {
		t.collateral[k] += v
	}
	for k, v := range o.closedBy {
		t.closedBy[k] += v
	}
}

func sortedCounts[K ~string, V int | int64](m map[K]V) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestChaosSoak sends -chaos.requests requests, eight at a time, to a fault
// server whose faults a seeded plan draws at random, through pools of
// MaxConnsPerHost 1 and 4 over HTTP/1.1 and HTTP/2. At every sampled
// instant the pool's invariants hold; at the end every request has exactly
// one outcome, allowed for its fault and behaviour, nothing is left open,
// no goroutine leaked and heap in use is back where it began.
func TestChaosSoak(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -chaos.seed=%d), %d requests", seed, seed, *chaosRequests)
	require.Positive(t, *chaosRequests)

	baseline := goleak.IgnoreCurrent()
	heapBefore := heapInUse()
	start := time.Now()

	runs := []struct {
		name     string
		h2       bool
		maxConns int
	}{{"http1-conns1", false, 1}, {"http1-conns4", false, 4}, {"h2-conns1", true, 1}, {"h2-conns4", true, 4}}
	total := newTally()
	for i, run := range runs {
		n := *chaosRequests / len(runs)
		if i < *chaosRequests%len(runs) {
			n++
		}
		plan := chaosPlan(rand.New(rand.NewPCG(seed, uint64(i))), n)
		t.Run(run.name, func(t *testing.T) {
			tally := chaosRun(t, run.h2, run.maxConns, plan)
			total.add(tally)
		})
		if t.Failed() {
			t.FailNow()
		}
	}

	require.NoError(t, leaks.Name(goleak.Find(baseline)), "no goroutine leaked")
	heapAfter := heapInUse()
	t.Logf("total: %d requests in %s; faults: %s", total.requests, time.Since(start).Round(time.Millisecond), sortedCounts(total.byPath))
	t.Logf("total outcomes: %s", sortedCounts(total.byClass))
	t.Logf("total collateral outcomes: %s", sortedCounts(total.collateral))
	t.Logf("total dials %d (dial errors %d, server accepted %d), server read %d requests, late events %d, closes: %s",
		total.dials, total.dialErrs, total.accepted, total.serverRead, total.late, sortedCounts(total.closedBy))
	t.Logf("leaks 0, peak goroutines %d over %d samples, heap in use before %d KiB, after %d KiB",
		total.peakG, total.samples, heapBefore>>10, heapAfter>>10)
	require.LessOrEqual(t, int64(heapAfter)-int64(heapBefore), int64(chaosHeapSlack),
		"heap in use grew by more than %d bytes", chaosHeapSlack)
}

// chaosRun runs plan through a fresh pool and server and returns what it
// observed; the pool and the server are closed when it returns.
func chaosRun(t *testing.T, h2 bool, maxConns int, plan []chaosReq) *chaosTally {
	var sopts []faultserver.Option
	if h2 {
		sopts = append(sopts, faultserver.TLS())
	}
	srv, err := faultserver.New(sopts...)
	require.NoError(t, err)
	defer srv.Close()
	for _, f := range chaosFaults {
		if f.fault != nil {
			srv.Handle(f.path, f.fault)
		}
	}
	col := &httptrace.Collector{}
	popts := []pool.Option{
		pool.MaxConnsPerHost(maxConns), pool.MaxIdleConnsPerHost(maxConns), pool.BodyIdleTimeout(chaosBound), pool.WithObserver(col),
		pool.ConnectTimeout(5 * time.Second), pool.TLSHandshakeTimeout(5 * time.Second), pool.Protocols(protocols(h2)),
		// No idle timeout (none would fire during the soak anyway): with
		// one, net/http's HTTP/2 client re-arms the idle timer of a
		// connection that died with streams open when it forgets the
		// last of them (http2ClientConn.forgetStreamID, after the read
		// loop's cleanup stopped it). The timer then keeps the dead
		// connection, its Transport and this pool reachable until it
		// fires (IdleConnTimeout, 90s by default): megabytes the heap
		// check would count, though nothing leaks.
		pool.IdleConnTimeout(0),
	}
	if cfg := srv.ClientTLSConfig(); cfg != nil {
		popts = append(popts, pool.TLSClientConfig(cfg))
	}
	p, err := pool.New(popts...)
	require.NoError(t, err)
	defer p.Close()

	// Bound the whole run: generous, but finite.
	runCtx, stopRun := context.WithTimeout(context.Background(), time.Minute+time.Duration(len(plan))*20*time.Millisecond)
	defer stopRun()

	// The sampler checks the invariants at each change of the pool's
	// state until the workers are done.
	tally := newTally()
	var sampleErr error
	sampleCtx, stopSampler := context.WithCancel(runCtx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		p.WaitFor(sampleCtx, func(s pool.Stats) bool {
			tally.samples++
			tally.peakG = max(tally.peakG, runtime.NumGoroutine())
			if err := s.Check(); err != nil && sampleErr == nil {
				sampleErr = fmt.Errorf("sample %d: %w", tally.samples, err)
			}
			return false
		})
	}()

	var (
		next       atomic.Int64
		made       atomic.Int64
		wg         sync.WaitGroup
		errMu      sync.Mutex
		clientErrs []string
	)
	for range chaosWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(plan) || runCtx.Err() != nil {
					return
				}
				made.Add(1)
				req := plan[i]
				url := srv.URL() + chaosFaults[req.fault].path + "?i=" + strconv.Itoa(i)
				if err := chaosDo(runCtx, p.Client(), url, req.b); err != nil {
					errMu.Lock()
					clientErrs = append(clientErrs, err.Error())
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	stopSampler()
	<-sampled
	require.Empty(t, clientErrs, "the client itself misbehaved")
	require.NoError(t, runCtx.Err(), "the run's bound was reached after %d of %d requests", made.Load(), len(plan))
	require.EqualValues(t, len(plan), made.Load())
	require.NoError(t, sampleErr, "the pool's invariants hold at every sampled instant")
	require.Positive(t, tally.samples)

	// Every request has exactly one outcome, allowed for its fault.
	tally.requests = len(plan)
	tls := col.Timelines()
	require.Len(t, tls, len(plan), "one timeline per request made")
	seen := make([]bool, len(plan))
	for _, tl := range tls {
		u := tl.RawURL()
		i, err := strconv.Atoi(u.Query().Get("i"))
		require.NoError(t, err, u.String())
		require.False(t, seen[i], "request %d has two timelines", i)
		seen[i] = true
		req := plan[i]
		path := chaosFaults[req.fault].path
		require.Equal(t, path, u.Path)
		require.True(t, tl.Finished, "request %d %s: timeline not finished", i, path)
		require.Equal(t, 1, tl.Count(vocab.KindDone), "request %d %s: one done event", i, path)
		require.NotEmpty(t, tl.Outcome.Class, "request %d %s", i, path)
		require.True(t, tl.Status == 0 || tl.BodyClosed, "request %d %s: a response whose body was not closed", i, path)
		tally.byPath[path]++
		tally.byClass[tl.Outcome.Class]++
		if !slices.Contains(ownClasses(path, req.b, h2), tl.Outcome.Class) {
			require.True(t, collateral(h2, tl),
				"request %d %s (%s): outcome %s @%s: %v", i, path, req.b, tl.Outcome.Class, tl.Outcome.Stage, tl.Outcome.Err)
			tally.collateral[path+"→"+string(tl.Outcome.Class)]++
		}
	}
	tally.late = len(col.Late())
	col.Reset() // keep counts only

	// Nothing is left behind.
	ctx, cancel := context.WithTimeout(runCtx, 10*time.Second)
	defer cancel()
	require.NoError(t, p.Check(ctx))
	s := p.Stats()
	require.NoError(t, s.Check())
	require.Zero(t, s.OpenBodies, "no body open")
	require.Zero(t, s.Active, "no connection active")
	require.Zero(t, s.InFlight)
	require.Zero(t, s.Waiting)
	require.Zero(t, s.Dialing)
	require.EqualValues(t, len(plan), s.Requests)

	p.Close()
	require.NoError(t, p.WaitFor(ctx, func(s pool.Stats) bool { return s.Open == 0 }))
	srv.CloseClientConnections() // handlers that saw their client leave may not have returned yet
	require.NoError(t, srv.Close())
	s = p.Stats()
	require.NoError(t, s.Check())
	tot := srv.Totals()
	tally.dials, tally.dialErrs, tally.closedBy = s.Dials, s.DialErrors, s.ClosedBy
	tally.accepted, tally.serverRead = tot.ConnsAccepted, tot.RequestsRead
	require.Equal(t, s.Dials-s.DialErrors, tot.ConnsAccepted, "every connection dialed was accepted by the server, and no other")
	t.Logf("%d requests; outcomes: %s", tally.requests, sortedCounts(tally.byClass))
	t.Logf("collateral: %s", sortedCounts(tally.collateral))
	t.Logf("dials %d (errors %d), max open %d, reused %d, waited %d; server accepted %d, read %d; late events %d; peak goroutines %d over %d samples; closes: %s",
		s.Dials, s.DialErrors, s.MaxOpen, s.ReusedRequests, s.WaitCount, tot.ConnsAccepted, tot.RequestsRead, tally.late,
		tally.peakG, tally.samples, sortedCounts(s.ClosedBy))
	return tally
}

// chaosDo sends one request and treats its response as b says. It returns
// an error only when the client code itself went wrong; the request's
// outcome is the tracer's to record.
func chaosDo(ctx context.Context, c *http.Client, url string, b behaviour) error {
	bound := chaosGuard
	if b == hangDeadline {
		bound = chaosBound
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := get(ctx, c, url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	switch b {
	case readAll, hangDeadline:
		io.Copy(io.Discard, resp.Body)
	case readSome:
		io.CopyN(io.Discard, resp.Body, 10)
	case cancelMidBody:
		if _, err := io.CopyN(io.Discard, resp.Body, 1); err != nil {
			return nil
		}
		cancel()
		if _, err := io.Copy(io.Discard, resp.Body); err == nil {
			return fmt.Errorf("%s: the body of a stalled response ended cleanly after cancel", url)
		}
	}
	return nil
}
