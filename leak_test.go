package connaudit_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// TestEveryScenarioLeavesNothingBehind runs the whole catalogue: after each
// fault, the same single-connection pool serves /ok with no connection
// active, no body open and no goroutine leaked.
func TestEveryScenarioLeavesNothingBehind(t *testing.T) {
	r, err := audit.NewRunner()
	require.NoError(t, err)
	for _, s := range audit.Catalogue() {
		t.Run(s.Name, func(t *testing.T) {
			res := r.RunOne(context.Background(), s)
			if s.ServedOnly != "" {
				require.Contains(t, res.Skipped, "served only", "a scenario served only is skipped in process, with its reason")
				return
			}
			if !res.Pass {
				var b strings.Builder
				audit.Report{Results: []audit.Result{res}, Failed: 1}.WriteText(&b, true)
				t.Fatalf("scenario failed:\n%s", b.String())
			}
			require.True(t, res.Observed.Recovered)
			require.Empty(t, res.Observed.Leaks)
			if s.Expect.Leak {
				require.NotEmpty(t, res.Observed.LeakFound, "the scenario's own leak was detected")
			}
		})
	}
}

// TestUnclosedBodyIsNamed leaves a body unclosed on a single-connection
// pool: the check names it with where it was opened, the next request waits
// for the pinned connection, and closing the body frees it.
func TestUnclosedBodyIsNamed(t *testing.T) {
	srv := newServer(t, map[string]faultserver.Fault{"/leak": faultserver.OK{}})
	col := &httptrace.Collector{}
	p := newPool(t, col)

	resp, err := get(bounded(t), p.Client(), srv.URL()+"/leak?token=s3cret")
	require.NoError(t, err)

	err = p.Check(bounded(t))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "open body: GET")
	require.Contains(t, msg, "/leak?token=REDACTED")
	require.NotContains(t, msg, "s3cret")
	require.Contains(t, msg, "TestUnclosedBodyIsNamed", "the body is named with where it was opened")
	require.Contains(t, msg, "leak_test.go")
	require.Contains(t, msg, "active connection #1")
	bodies := p.OpenBodies()
	require.Len(t, bodies, 1)
	require.EqualValues(t, 1, bodies[0].Conn)

	// The goroutines the pinned connection holds are named by cause.
	named := strings.Join(leaks.Goroutines(), "\n")
	require.Contains(t, named, "connection held by an unclosed response body")

	// /ok waits for the one connection...
	okDone := make(chan error, 1)
	go func() {
		_, _, err := getAll(bounded(t), p.Client(), srv.URL()+"/ok")
		okDone <- err
	}()
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Waiting == 1 }))
	select {
	case err := <-okDone:
		t.Fatalf("/ok finished while the connection was pinned: %v", err)
	default:
	}

	// ...until the body is closed.
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, <-okDone)
	require.EqualValues(t, 1, p.Stats().Dials, "read to EOF, the connection went back to the pool")
	requireRecovered(t, p, srv)
}
