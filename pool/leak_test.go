package pool_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
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

// collectedEvents passes on the "body-collected" events.
type collectedEvents chan httptrace.Event

func (c collectedEvents) Observe(*httptrace.Timeline) {}

func (c collectedEvents) ObserveEvent(_ *httptrace.Timeline, ev httptrace.Event) {
	if ev.Kind == "body-collected" {
		c <- ev
	}
}

// TestUnclosedBodies: response bodies dropped without Close are reported
// when garbage collected ("body-collected"), listed as open bodies with
// when and where they were opened, named by Check and shown in the text
// view; the connections they pin stay pinned until their requests end.
func TestUnclosedBodies(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	events := make(collectedEvents, 8)
	p := newPool(t, pool.CaptureStacks(), pool.MaxConnsPerHost(0), pool.UnclosedBodyWarning(time.Hour),
		pool.WithObserver(events))

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
	dropA("/a2")
	dropB("/b1")
	collect(t, "three dropped bodies", collected(3))
	require.Len(t, events, 3, "one event per body")

	bodies := p.OpenBodies()
	require.Len(t, bodies, 3)
	require.Equal(t, srv.URL+"/a1", bodies[0].URL)
	for _, b := range bodies {
		require.NotZero(t, b.Conn)
		require.False(t, b.OpenedAt.IsZero())
		require.Contains(t, b.Site(), "TestUnclosedBodies.func")
		require.Contains(t, b.Site(), "leak_test.go:")
		require.Contains(t, b.Stack, "TestUnclosedBodies")
	}
	require.Equal(t, bodies[0].Site(), bodies[1].Site())
	require.NotEqual(t, bodies[0].Site(), bodies[2].Site())

	// The collected bodies still pin their connections: Check names them,
	// and so does the text view.
	s := p.Stats()
	require.Equal(t, 3, s.OpenBodies)
	require.Equal(t, 3, s.Active)
	err := p.Check(bounded(t))
	require.Error(t, err)
	require.Equal(t, 3, strings.Count(err.Error(), "garbage collected without Close"), err.Error())
	var text strings.Builder
	require.NoError(t, p.Snapshot().WriteText(&text, true))
	require.Contains(t, text.String(), "OPENED AT")
	require.Equal(t, 3, strings.Count(text.String(), "(garbage collected unclosed)"), text.String())
	require.Contains(t, text.String(), bodies[0].OpenedAt.Format("15:04:05.000"))
	require.Equal(t, 3, strings.Count(text.String(), "opened at:\n"), "verbose: each body's stack")

	// CloseIdleConnections does not free them; cancelling their requests
	// does.
	p.CloseIdleConnections()
	require.Equal(t, 3, p.Stats().Open)
	cancel()
	waitStats(t, p, "pinned connections closed", func(s pool.Stats) bool { return s.Open == 0 })
	require.NoError(t, p.Stats().Check())
}
