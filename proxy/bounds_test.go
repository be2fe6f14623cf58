package proxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// rawConn dials the proxy below HTTP, its reads and writes bounded by the
// test's context; closed at the end of the test.
func rawConn(t *testing.T, p *proxy.Proxy) net.Conn {
	t.Helper()
	ctx := testkit.Bounded(t)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(p.URL(), "http://"))
	require.NoError(t, err)
	if dl, ok := ctx.Deadline(); ok {
		require.NoError(t, c.SetDeadline(dl))
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readToClose reads c until the other end closes it; it fails the test if
// the test's deadline ends the read first.
func readToClose(t *testing.T, c net.Conn) string {
	t.Helper()
	b, err := io.ReadAll(c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy never closed the connection")
	return string(b)
}

// goodRequests sends n requests as the client "good" and requires each
// to succeed.
func goodRequests(t *testing.T, c *goClient, p *proxy.Proxy, n int, each func()) {
	t.Helper()
	for range n {
		status, err := c.do(t, "GET", p.URL()+"/good", nil, "X-Client", "good")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		if each != nil {
			each()
		}
	}
}

// A slowloris client trickles its request's header, a line after each
// request of another client, and never ends it: the proxy cuts it at the
// header bound, as its own close, while the other client's requests all
// succeed, before the cut and after.
func TestSlowlorisCutAtHeaderBound(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.ClientHeader("X-Client"),
		proxy.DownstreamBounds(proxy.Bounds{Header: 500 * time.Millisecond}))
	slow := rawConn(t, p)
	_, err := io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	good := newGoClient(t, nil)
	trickled := 0
	goodRequests(t, good, p, 10, func() {
		if _, err := io.WriteString(slow, "X-Trickle: y\r\n"); err == nil {
			trickled++
		}
	})
	require.Positive(t, trickled)
	require.Empty(t, readToClose(t, slow), "cut without an answer")
	goodRequests(t, good, p, 5, nil)
	good.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	p.Close()
	rep := p.Report()
	s := client(t, rep, "127.0.0.1")
	require.Equal(t, 1, s.Conns)
	require.Equal(t, 0, s.Requests)
	require.Equal(t, map[string]int{"proxy: header-timeout": 1}, s.Closes)
	g := client(t, rep, "good")
	require.Equal(t, 15, g.Requests)
	require.Equal(t, map[int]int{200: 15}, g.Statuses)
	require.Equal(t, map[string]int{"client: client-close": g.Conns}, g.Closes)
	require.EqualValues(t, 15, up.requests.Load(), "the slow request never reached the upstream")
	require.False(t, rep.Failed())
}

// A request whose header is past the cap is answered 431 and its
// connection closed, as the proxy's close; another client is served
// before and after.
func TestHugeHeaderRefused(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.ClientHeader("X-Client"),
		proxy.DownstreamBounds(proxy.Bounds{HeaderBytes: 4 << 10}))
	good := newGoClient(t, nil)
	goodRequests(t, good, p, 3, nil)
	huge := rawConn(t, p)
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(huge, "GET /huge HTTP/1.1\r\nHost: x\r\nX-Huge: "+strings.Repeat("h", 64<<10)+"\r\n\r\n")
		wrote <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(huge), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	readToClose(t, huge)
	<-wrote
	goodRequests(t, good, p, 3, nil)
	good.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	p.Close()
	rep := p.Report()
	h := client(t, rep, "127.0.0.1")
	require.Equal(t, 0, h.Requests)
	require.Equal(t, map[string]int{"proxy: header-too-large": 1}, h.Closes)
	require.Equal(t, "431 Request Header Fields Too Large", h.List[0].Detail)
	g := client(t, rep, "good")
	require.Equal(t, map[int]int{200: 6}, g.Statuses)
	require.EqualValues(t, 6, up.requests.Load())
}

// A connection idle for the idle bound is closed by the proxy, and
// accounted for as its close, neither the client's nor the upstream's; the
// client's next request goes on a new connection.
func TestIdleBound(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.DownstreamBounds(proxy.Bounds{Idle: 100 * time.Millisecond}))
	c := newGoClient(t, nil)
	_, err := c.do(t, "GET", p.URL()+"/", nil)
	require.NoError(t, err)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	status, err := c.do(t, "GET", p.URL()+"/", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	c.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	p.Close()
	rep := p.Report()
	cl := client(t, rep, "127.0.0.1")
	require.Equal(t, 2, cl.Conns)
	require.Equal(t, map[string]int{"proxy: idle-timeout": 1, "client: client-close": 1}, cl.Closes)
	require.Equal(t, "proxy", cl.List[0].ClosedBy)
	require.False(t, rep.Failed())
}

// Past the connection cap, a new connection is closed as soon as it is
// accepted, as the proxy's close; the connections open are served on.
func TestConnCap(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.ClientHeader("X-Client"), proxy.DownstreamBounds(proxy.Bounds{Conns: 2}))
	a, b := newGoClient(t, nil), newGoClient(t, nil)
	goodRequests(t, a, p, 1, nil)
	goodRequests(t, b, p, 1, nil)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 2 }))
	extra := rawConn(t, p)
	_, _ = io.WriteString(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Empty(t, readToClose(t, extra))
	goodRequests(t, a, p, 2, nil)
	goodRequests(t, b, p, 2, nil)
	require.EqualValues(t, 1, a.dials.Load())
	require.EqualValues(t, 1, b.dials.Load())
	a.tr.CloseIdleConnections()
	b.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	p.Close()
	rep := p.Report()
	require.Equal(t, map[string]int{"proxy: conn-limit": 1}, client(t, rep, "127.0.0.1").Closes)
	require.Equal(t, map[string]int{"client: client-close": 2}, client(t, rep, "good").Closes)
	require.EqualValues(t, 6, up.requests.Load())
}

func TestBoundsRefuseNegative(t *testing.T) {
	_, err := proxy.New("http://127.0.0.1:1", proxy.DownstreamBounds(proxy.Bounds{Idle: -time.Second}))
	require.ErrorContains(t, err, "negative bound")
}
