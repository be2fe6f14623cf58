package proxy_test

import (
	"bufio"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// verdict returns the result of the client's verdict of that name.
func verdict(t *testing.T, rep *proxy.Report, name, client string) proxy.Verdict {
	t.Helper()
	for _, v := range rep.Verdicts {
		if v.Name == name && v.Client == client {
			return v
		}
	}
	t.Fatalf("no verdict %s for %s in %+v", name, client, rep.Verdicts)
	return proxy.Verdict{}
}

// With DownstreamTLS the proxy speaks HTTP/2 to a Go client that trusts
// its CA: every request on one connection, counted as h2.
func TestDownstreamTLSHTTP2(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.DownstreamTLS())
	require.True(t, strings.HasPrefix(p.URL(), "https://"), p.URL())
	require.NotEmpty(t, p.CA())
	c := newGoClient(t, p.CA())
	for range 3 {
		req, err := http.NewRequestWithContext(testkit.Bounded(t), "GET", p.URL()+"/h2", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 2, resp.ProtoMajor, "the client speaks HTTP/2 to the proxy")
		require.Equal(t, "ok", string(body))
	}
	c.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 3 }))
	rep := p.Report()
	cl := client(t, rep, "127.0.0.1")
	require.EqualValues(t, 1, c.dials.Load())
	require.Equal(t, 1, cl.Conns)
	require.Equal(t, 3, cl.Requests)
	require.Equal(t, 2, cl.Reused)
	require.Equal(t, "h2", cl.List[0].Proto)
	require.EqualValues(t, 3, up.requests.Load())

	// A client that does not trust the proxy's CA is refused, and no
	// request reaches the upstream.
	stranger := newGoClient(t, nil)
	_, err := stranger.do(t, "GET", p.URL()+"/h2", nil)
	require.ErrorContains(t, err, "certificate")
	require.EqualValues(t, 3, up.requests.Load())
}

// An HTTPS upstream is verified against UpstreamCA: with its CA the
// requests pass on one kept-alive connection; without, the proxy answers
// 502 and says why.
func TestUpstreamCA(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "tls ok")
	}))
	t.Cleanup(up.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})

	p := start(t, up.URL, proxy.UpstreamCA(caPEM))
	c := newGoClient(t, nil)
	for range 2 {
		status, err := c.do(t, "GET", p.URL()+"/", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
	}
	rep := p.Report()
	require.Equal(t, 1, rep.Pool.Conns)
	require.Equal(t, 2, rep.Pool.Requests)

	// The system's roots do not know the test server's CA.
	unverified := start(t, up.URL)
	req, err := http.NewRequestWithContext(testkit.Bounded(t), "GET", unverified.URL()+"/", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Contains(t, string(body), "certificate")
	_, err = proxy.New(up.URL, proxy.UpstreamCA([]byte("no PEM here")))
	require.ErrorContains(t, err, "no PEM certificate")
}

// goaway over HTTP/2: the connection's 2nd request is served, then the
// connection is sent a GOAWAY; Go's client opens a new one for the 3rd.
func TestGoAwayHTTP2(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, proxy.DownstreamTLS(), rules(t, "goaway nth=2"))
	c := newGoClient(t, p.CA())
	for i := range 3 {
		status, err := c.do(t, "GET", p.URL()+"/", nil)
		require.NoError(t, err, "request %d", i+1)
		require.Equal(t, http.StatusOK, status)
		if i == 1 {
			// The GOAWAY's connection ends once its requests are served.
			require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
		}
	}
	c.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 3 }))
	rep := p.Report()
	cl := client(t, rep, "127.0.0.1")
	require.EqualValues(t, 2, c.dials.Load())
	require.Equal(t, 2, cl.Conns)
	require.Equal(t, 1, cl.Faults)
	require.Equal(t, 2, cl.List[0].Requests)
	require.Equal(t, []string{"goaway"}, cl.List[0].Faults)
	require.Equal(t, "proxy", cl.List[0].ClosedBy)
	require.Equal(t, 1, cl.List[1].Requests)
	require.Empty(t, cl.List[1].Faults)
	require.EqualValues(t, 3, up.requests.Load())
	require.Empty(t, rep.Replays, "no request was lost")

	// Over HTTP/1.1 the rule touches nothing.
	p1 := start(t, up.URL, rules(t, "goaway nth=2"))
	c1 := newGoClient(t, nil)
	for range 3 {
		_, err := c1.do(t, "GET", p1.URL()+"/", nil)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, c1.dials.Load())
	require.Equal(t, 0, client(t, p1.Report(), "127.0.0.1").Faults)
}

// server-idle-timeout fails for a client that sent a request on a
// connection idle as long as the upstream's stated idle timeout, passes
// for one that did not, and is skipped when the timeout is not known.
func TestServerIdleTimeoutVerdict(t *testing.T) {
	up := newUpstream(t, nil)
	for _, c := range []struct {
		name  string
		opts  []proxy.Option
		reuse bool
		want  string
	}{
		// Any idle gap is at least 1ns: a reused connection fails.
		{"reused past the timeout", []proxy.Option{proxy.UpstreamIdle(1)}, true, "fail"},
		// A client that never reuses never sends on an idle connection.
		{"never reused", []proxy.Option{proxy.UpstreamIdle(1)}, false, "pass"},
		{"reused within it", []proxy.Option{proxy.UpstreamIdle(1 << 62)}, true, "pass"},
		{"not known", nil, true, "skipped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, up.URL, c.opts...)
			gc := newGoClient(t, nil)
			gc.tr.DisableKeepAlives = !c.reuse
			for range 3 {
				_, err := gc.do(t, "GET", p.URL()+"/", nil)
				require.NoError(t, err)
			}
			gc.tr.CloseIdleConnections()
			require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 3 }))
			rep := p.Report()
			v := verdict(t, rep, "server-idle-timeout", "127.0.0.1")
			require.Equal(t, c.want, v.Result, v.Detail)
			require.Equal(t, c.want == "fail", rep.Failed())
			if c.reuse {
				require.Positive(t, client(t, rep, "127.0.0.1").MaxIdle)
			}
		})
	}
}

// hostileUpstream answers every request with reply, then waits for the
// proxy to hang up.
func hostileUpstream(t *testing.T, reply string) string {
	t.Helper()
	return "http://" + testserver.Raw(t, func(c net.Conn) {
		br := bufio.NewReader(io.LimitReader(c, 64<<10))
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				if _, err := io.WriteString(c, reply); err != nil {
					return
				}
			}
		}
	}).Addr().String()
}

// A hostile upstream's reply — a malformed status line, headers past the
// 1 MiB bound — is a 502 that says what was wrong, counted as the
// upstream's error; never a panic nor a hang. A body longer than its
// Content-Length reaches the client cut at its length; what followed is
// never taken for the next request's response.
func TestHostileUpstream(t *testing.T) {
	for _, c := range []struct {
		name, reply, want string
	}{
		{"malformed status line", "HTTP/1.1 two hundred OK\r\nContent-Length: 2\r\n\r\nok", "malformed HTTP status code"},
		{"no status line", "\x00\x01garbage\r\n\r\n", "malformed HTTP response"},
		{"oversized headers", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\nContent-Length: 2\r\n\r\nok",
			"server response headers exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, hostileUpstream(t, c.reply))
			gc := newGoClient(t, nil)
			for range 2 {
				req, err := http.NewRequestWithContext(testkit.Bounded(t), "GET", p.URL()+"/", nil)
				require.NoError(t, err)
				resp, err := gc.Do(req)
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusBadGateway, resp.StatusCode)
				require.Contains(t, string(body), c.want)
			}
			gc.tr.CloseIdleConnections()
			require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 2 }))
			rep := p.Report()
			cl := client(t, rep, "127.0.0.1")
			require.Equal(t, 2, cl.Requests)
			require.Equal(t, map[int]int{http.StatusBadGateway: 2}, cl.Statuses)
			require.Equal(t, 1, cl.Conns, "a 502 keeps the client's connection")
			require.Equal(t, map[string]int{"client: client-close": 1}, cl.Closes)
			require.Empty(t, rep.Replays)
		})
	}

	t.Run("body longer than Content-Length", func(t *testing.T) {
		p := start(t, hostileUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA-BYTES-NEVER-FORWARDED"))
		gc := newGoClient(t, nil)
		for i := range 3 {
			req, err := http.NewRequestWithContext(testkit.Bounded(t), "GET", p.URL()+"/", nil)
			require.NoError(t, err)
			resp, err := gc.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			// The upstream connection may be taken again before its
			// read loop saw the extra bytes: then they are a malformed
			// response, a 502; never a body of the client's.
			switch resp.StatusCode {
			case http.StatusOK:
				require.Equal(t, "ok", string(body), "request %d", i+1)
			case http.StatusBadGateway:
				require.Contains(t, string(body), "malformed HTTP", "request %d", i+1)
				require.NotZero(t, i, "the first response is whole")
			default:
				t.Fatalf("request %d: status %d: %s", i+1, resp.StatusCode, body)
			}
		}
		gc.tr.CloseIdleConnections()
		require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 3 }))
		rep := p.Report()
		cl := client(t, rep, "127.0.0.1")
		require.Equal(t, 3, cl.Requests)
		require.Equal(t, 3, cl.Statuses[http.StatusOK]+cl.Statuses[http.StatusBadGateway])
		require.Positive(t, cl.Statuses[http.StatusOK])
		require.GreaterOrEqual(t, rep.Pool.Conns, 2, "the upstream connection with bytes past its response is not kept")
	})
}

// The upstream's idle timeout measured from a connection it closed idle
// is never longer than that connection was idle: one that served a few
// requests gives it; one that served more than its history holds
// (package pool's records stop at 256 states) gives none, where the last
// idle period recorded was long before its close.
func TestMeasuredUpstreamIdle(t *testing.T) {
	for _, c := range []struct {
		name     string
		requests int
		measured bool
	}{{"a few requests", 3, true}, {"past the history", 1000, false}} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "ok")
			}))
			up.Config.IdleTimeout = 100 * time.Millisecond // the upstream closes idle connections
			up.Start()
			t.Cleanup(up.Close)
			p := start(t, up.URL)
			gc := newGoClient(t, nil)
			var lastStart time.Time // the connection went idle after it
			for range c.requests {
				lastStart = time.Now()
				status, err := gc.do(t, "GET", p.URL()+"/", nil)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status)
			}
			require.NoError(t, proxy.WaitUpstream(testkit.Bounded(t), p, func(s pool.Stats) bool { return s.Closed == 1 }))
			idleFor := time.Since(lastStart) // at most
			rep := p.Report()
			require.Equal(t, 1, rep.Pool.Conns)
			require.Equal(t, map[string]int{"server: server-closed-idle": 1}, rep.Pool.Closes)
			require.Equal(t, c.measured, rep.Pool.IdleTimeout > 0, "%v", rep.Pool.IdleTimeout)
			require.LessOrEqual(t, rep.Pool.IdleTimeout, idleFor, "measured longer than the connection was idle")
		})
	}
}
