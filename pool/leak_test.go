package pool_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// collect runs the garbage collector, a bounded number of times, until
// ready reports true.
func collect(t *testing.T, what string, ready func() bool) {
	t.Helper()
	for range 100 {
		runtime.GC()
		if ready() {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%s: not collected after 100 GCs", what)
}

// nextReport waits for a report, running the garbage collector meanwhile;
// the wait on the channel is bounded per GC and in total.
func nextReport(t *testing.T, reports <-chan pool.UnclosedBodyReport) pool.UnclosedBodyReport {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for range 100 {
		runtime.GC()
		select {
		case r := <-reports:
			return r
		case <-time.After(50 * time.Millisecond): // a bound on this wait, not a synchronisation
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatal("no unclosed-body report")
	return pool.UnclosedBodyReport{}
}

func TestUnclosedBodyReports(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	reports := make(chan pool.UnclosedBodyReport, 8)
	p := newPool(t, pool.CaptureStacks(), pool.MaxConnsPerHost(0),
		pool.UnclosedBodyReports(func(r pool.UnclosedBodyReport) { reports <- r }))

	// Every request uses ctx: cancelling it is what frees the connections
	// the dropped bodies pin (the garbage collector does not).
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	dropA := func(path string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req) // call site A
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	dropB := func(path string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req) // call site B
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	collected := func(n int) func() bool {
		return func() bool {
			c := 0
			for _, b := range p.OpenBodies() {
				if b.Collected {
					c++
				}
			}
			return c == n
		}
	}

	dropA("/a1")
	r1 := nextReport(t, reports)
	require.True(t, r1.Collected)
	require.Equal(t, srv.URL+"/a1", r1.URL)
	require.Contains(t, r1.Site, "TestUnclosedBodyReports.func")
	require.Contains(t, r1.Site, "leak_test.go:")
	require.Contains(t, r1.Stack, "TestUnclosedBodyReports")

	dropA("/a2") // same call site: collected, not reported again
	collect(t, "second body of site A", collected(2))

	dropB("/b1") // another call site: reported
	r3 := nextReport(t, reports)
	require.Equal(t, srv.URL+"/b1", r3.URL)
	require.NotEqual(t, r1.Site, r3.Site)
	collect(t, "body of site B", collected(3))
	select {
	case r := <-reports:
		t.Fatalf("reported twice for one call site: %+v", r)
	default:
	}

	// The collected bodies still pin their connections: Check names them.
	s := p.Stats()
	require.Equal(t, 3, s.OpenBodies)
	require.Equal(t, 3, s.Active)
	err := p.Check(bounded(t))
	require.Error(t, err)
	require.Equal(t, 3, strings.Count(err.Error(), "garbage collected without Close"), err.Error())

	// CloseIdleConnections does not free them; cancelling their requests
	// does.
	p.CloseIdleConnections()
	require.Equal(t, 3, p.Stats().Open)
	cancel()
	waitStats(t, p, "pinned connections closed", func(s pool.Stats) bool { return s.Open == 0 })
	require.NoError(t, p.Stats().Check())
}

func TestVerifyNone(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	t.Run("clean", func(t *testing.T) {
		srv := newServer(t, plainHTTP, okHandler)
		p := newPool(t)
		require.Equal(t, "ok", get(t, p, srv.URL))
		srv.Close()
		pool.VerifyNone(t, p, baseline)
	})
	t.Run("leak", func(t *testing.T) {
		srv := newServer(t, plainHTTP, okHandler)
		p := newPool(t, pool.CaptureStacks())
		ctx, cancel := context.WithCancel(bounded(t))
		defer cancel()
		resp := open(t, p, ctx, srv.URL)
		defer resp.Body.Close()

		rec := &recordingTB{TB: t}
		pool.VerifyNone(rec, p, baseline)
		require.Len(t, rec.errors, 1)
		msg := rec.errors[0]
		require.Contains(t, msg, "open body: GET "+srv.URL)
		require.Contains(t, msg, "TestVerifyNone")
		require.Contains(t, msg, "active connection #1")
		require.Contains(t, msg, "connection held by an unclosed response body")
		require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
		require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).writeLoop)")
		require.Contains(t, msg, "1 × a server connection still open (net/http.(*conn).serve)")
		require.Contains(t, msg, "1 × a server still running (net/http.(*Server).Serve)")
	})
}

// recordingTB records the errors reported to it instead of failing.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestNameLeaks(t *testing.T) {
	require.NoError(t, pool.NameLeaks(nil))
	plain := errors.New("found unexpected goroutines:\n[Goroutine 7 in state chan receive, with main.worker on top of the stack:\ngoroutine 7 [chan receive]:\nmain.worker()\n\t/src/main.go:10 +0x1d\n]")
	require.Same(t, plain, pool.NameLeaks(plain), "nothing to name")

	// The text goleak prints: a list of stacks, each headed by
	// "Goroutine N in state S, with F on top of the stack:".
	synthetic := errors.New(`found unexpected goroutines:
[Goroutine 21 in state IO wait, with internal/poll.runtime_pollWait on top of the stack:
internal/poll.runtime_pollWait(0x7f0c, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
net.(*conn).Read(0xc000112010, {0xc00019a000, 0x1000, 0x1000})
	/usr/local/go/src/net/net.go:196 +0x45
bufio.(*Reader).Peek(0xc0001980c0, 0x1)
	/usr/local/go/src/bufio/bufio.go:152 +0x5d
net/http.(*persistConn).readLoop(0xc0001a2000)
	/usr/local/go/src/net/http/transport.go:2346 +0x1a5
created by net/http.(*Transport).dialConn in goroutine 20
	/usr/local/go/src/net/http/transport.go:1960 +0x16a5
 Goroutine 22 in state select, with net/http.(*persistConn).writeLoop on top of the stack:
net/http.(*persistConn).writeLoop(0xc0001a2000)
	/usr/local/go/src/net/http/transport.go:2624 +0xe7
created by net/http.(*Transport).dialConn in goroutine 20
	/usr/local/go/src/net/http/transport.go:1961 +0x16f8
 Goroutine 9 in state IO wait, with internal/poll.runtime_pollWait on top of the stack:
internal/poll.runtime_pollWait(0x7f0d, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
net/http.(*conn).serve(0xc0000b2000, {0xc8, 0xc0000a4000})
	/usr/local/go/src/net/http/server.go:2102 +0x625
created by net/http.(*Server).Serve in goroutine 8
	/usr/local/go/src/net/http/server.go:3454 +0x485
]`)
	named := pool.NameLeaks(synthetic)
	require.ErrorIs(t, named, synthetic)
	msg := named.Error()
	require.Contains(t, msg, "connection held by an unclosed response body")
	require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
	require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).writeLoop)")
	require.Contains(t, msg, "1 × a server connection still open (net/http.(*conn).serve)")
	require.NotContains(t, msg, "server still running", "a 'created by' line is not the goroutine itself")

	// runtime.Stack's own format: blocks separated by blank lines.
	raw := errors.New("goroutine 21 [IO wait]:\nnet/http.(*persistConn).readLoop(0xc0001a2000)\n\t/usr/local/go/src/net/http/transport.go:2346 +0x1a5\n\n" +
		"goroutine 23 [IO wait]:\nnet/http.(*persistConn).readLoop(0xc0001a2100)\n\t/usr/local/go/src/net/http/transport.go:2346 +0x1a5\n")
	require.Contains(t, pool.NameLeaks(raw).Error(), "2 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
}
