package proxy_test

import (
	"sync"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// client returns the report's client of that name.
func client(t *testing.T, rep *proxy.Report, name string) proxy.Client {
	t.Helper()
	for _, c := range rep.Clients {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no client %q in the report: %+v", name, rep.Clients)
	return proxy.Client{}
}

// The proxy's count of each client's connections and requests equals the
// client's own dials and requests, and the upstream pool's equals the
// upstream's accepted connections and requests read.
func TestAccountingEqualsBothEnds(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.ClientHeader("X-Client"))
	seq, par := newGoClient(t, nil), newGoClient(t, nil)
	for range 10 {
		status, err := seq.do(t, "GET", p.URL()+"/a?token=x", nil, "X-Client", "seq")
		require.NoError(t, err)
		require.Equal(t, 200, status)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				status, err := par.do(t, "POST", p.URL()+"/b", nil, "X-Client", "par")
				if err != nil || status != 200 {
					t.Errorf("status %d, %v", status, err)
				}
			}
		})
	}
	wg.Wait()
	seq.tr.CloseIdleConnections()
	par.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool {
		return c.Open == 0 && c.Finished == 30
	}))
	rep := p.Report()
	s, c := client(t, rep, "seq"), client(t, rep, "par")
	require.Equal(t, int(seq.dials.Load()), s.Conns)
	require.Equal(t, 10, s.Requests)
	require.Equal(t, 10-s.Conns, s.Reused)
	require.Equal(t, map[string]int{"client: client-close": s.Conns}, s.Closes)
	// A dial of Go's Transport that a connection freed first made
	// unneeded carries no request, so no X-Client: the proxy names it by
	// its source address, with no request on it.
	spare := 0
	for _, cl := range rep.Clients {
		if cl.Name == "127.0.0.1" {
			require.Zero(t, cl.Requests, "%+v", cl)
			spare = cl.Conns
		}
	}
	require.Equal(t, int(par.dials.Load()), c.Conns+spare)
	require.Equal(t, 20, c.Requests)
	require.Equal(t, 0, c.Open)
	require.Equal(t, int(up.conns.Load()), rep.Pool.Conns)
	require.Equal(t, int(up.requests.Load()), rep.Pool.Requests)
	require.Equal(t, 30, rep.Pool.Requests)
	require.False(t, rep.Failed())
	require.Empty(t, rep.Replays)
}
