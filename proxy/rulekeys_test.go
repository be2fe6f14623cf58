package proxy_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// A rule keyed "reused" touches every request on a connection that served
// one before, and no first request of a connection.
func TestRuleReused(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "status=503 reused"))
	c := newGoClient(t, nil)
	var got []int
	for i := range 5 {
		if i == 3 {
			c.tr.CloseIdleConnections() // the 4th request on a new connection
		}
		status, err := c.do(t, "GET", p.URL()+"/", nil)
		require.NoError(t, err)
		got = append(got, status)
	}
	require.Equal(t, []int{200, 503, 503, 200, 503}, got)
	require.EqualValues(t, 2, c.dials.Load())
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 5 }))
	as := proxy.Attempts(p, "127.0.0.1")
	require.Len(t, as, 5)
	for _, a := range as {
		require.Equal(t, a.Nth >= 2, a.Fault != "", "request %d, the %d on its connection", a.ID, a.Nth)
	}
	require.EqualValues(t, 2, up.requests.Load())
}

// A rule keyed "idle=D" touches exactly the requests that followed an idle
// gap of D or longer on their connection: never a connection's first,
// never one sent at once after another. A second proxy's idle-close=D,
// on a connection opened once the first went idle, says when D has
// passed.
func TestRuleIdle(t *testing.T) {
	const d = 50 * time.Millisecond
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "status=503 idle=50ms"))
	clock := start(t, up.URL, rules(t, "idle-close=50ms"))
	c := newGoClient(t, nil)
	send := func() int {
		status, err := c.do(t, "GET", p.URL()+"/", nil)
		require.NoError(t, err)
		return status
	}
	require.Equal(t, http.StatusOK, send(), "a connection's first request")
	send()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 2 }))
	readToClose(t, rawConn(t, clock)) // d passed: the connection has been idle d at least
	require.Equal(t, http.StatusServiceUnavailable, send(), "after an idle gap of d")
	send()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 4 }))
	as := proxy.Attempts(p, "127.0.0.1")
	require.Len(t, as, 4)
	require.EqualValues(t, 1, c.dials.Load())
	for _, a := range as {
		require.Equal(t, a.Idle >= d, a.Fault != "", "request %d after %v idle", a.ID, a.Idle)
		require.Equal(t, a.Fault != "", a.Status == http.StatusServiceUnavailable)
	}
	require.Equal(t, 4-int(up.requests.Load()), client(t, p.Report(), "127.0.0.1").Faults)
}
