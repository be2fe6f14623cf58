package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

func rules(t *testing.T, texts ...string) proxy.Option {
	t.Helper()
	var rs []proxy.Rule
	for _, s := range texts {
		r, err := proxy.ParseRule(s)
		require.NoError(t, err, s)
		rs = append(rs, r)
	}
	return proxy.Faults(rs...)
}

// resetSecondGET has a Go client send three GETs through a proxy that
// resets the 2nd of a kept-alive connection before it reaches the
// upstream, once, and returns the upstream, the client and the report once
// every connection closed.
func resetSecondGET(t *testing.T) (*okUpstream, *goClient, *proxy.Report) {
	t.Helper()
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "reset nth=2 method=GET times=1"))
	c := newGoClient(t, nil)
	for range 3 {
		status, err := c.do(t, "GET", p.URL()+"/x", nil)
		require.NoError(t, err)
		require.Equal(t, 200, status)
	}
	c.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 && c.Finished == 4 }))
	return up, c, p.Report()
}

func TestParseRuleErrors(t *testing.T) {
	for _, s := range []string{"", "explode", "reset=1", "status=99", "status=abc", "delay-headers=-1s",
		"stall-body=x", "reset nth=0", "reset share=2", "reset share=0", "reset at=middle", "status=503 at=before-upstream",
		"idle-close=1s nth=2", "reset method=post", "reset path=x", "reset bogus=1", "reset nth"} {
		_, err := proxy.ParseRule(s)
		require.Error(t, err, "%q", s)
	}
	rs, err := proxy.ParseRules(strings.NewReader("# a comment\n\nreset nth=3\nstatus=503 times=2 method=GET\n"))
	require.NoError(t, err)
	require.Len(t, rs, 2)
	_, err = proxy.ParseRules(strings.NewReader("reset nth=3\nnope\n"))
	require.ErrorContains(t, err, "line 2")
}

// A GET reset before it reaches the upstream, on the 2nd request of a
// kept-alive connection, is sent again by Go's Transport on a new
// connection: a hidden retry, not a write twice; no other request is
// touched.
func TestResetNthHiddenRetry(t *testing.T) {
	up, c, rep := resetSecondGET(t)
	require.Len(t, rep.Replays, 1)
	rp := rep.Replays[0]
	require.Equal(t, "hidden-retry", rp.Class)
	require.Equal(t, "reset-before-upstream", rp.First.Fault)
	require.Equal(t, "not-sent", rp.First.Upstream)
	require.Equal(t, 2, rp.First.Nth)
	require.NotEqual(t, rp.First.Conn, rp.Again.Conn)
	require.EqualValues(t, 3, up.requests.Load())
	cl := client(t, rep, "127.0.0.1")
	require.Equal(t, int(c.dials.Load()), cl.Conns)
	require.Equal(t, 1, cl.Closes["proxy: fault"])
	require.False(t, rep.Failed())
}

// A POST the upstream processed whose response the proxy then drops,
// sent again by the client's retry, is a write committed twice: the
// verdict fails.
func TestWriteCommittedTwice(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "close at=after-upstream method=POST times=1"))
	c := newGoClient(t, nil)
	var tries int
	for tries = 1; tries <= 3; tries++ { // a caller's retry layer
		status, err := c.do(t, "POST", p.URL()+"/orders", strings.NewReader(`{"item":1}`))
		if err == nil && status == 200 {
			break
		}
	}
	require.Equal(t, 2, tries)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 2 }))
	rep := p.Report()
	require.EqualValues(t, 2, up.requests.Load())
	require.Len(t, rep.Replays, 1)
	require.Equal(t, "write-committed-twice", rep.Replays[0].Class)
	require.True(t, rep.Failed())
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.Contains(t, text.String(), "FAIL    write-committed-twice")
}

// 503 K times then pass: the first two requests get 503 from the proxy,
// not forwarded; the rest pass.
func TestStatusTimes(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "status=503 times=2"))
	c := newGoClient(t, nil)
	var got []int
	for range 4 {
		status, err := c.do(t, "GET", p.URL()+"/", nil)
		require.NoError(t, err)
		got = append(got, status)
	}
	require.Equal(t, []int{503, 503, 200, 200}, got)
	require.EqualValues(t, 2, up.requests.Load())
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 4 }))
	require.Equal(t, 2, client(t, p.Report(), "127.0.0.1").Retries)
}

// A share of the traffic is the same requests in every run of one seed.
func TestShareDeterministic(t *testing.T) {
	up := newUpstream(t, nil)
	run := func(seed uint64) []int {
		p := start(t, up.URL, rules(t, "status=503 share=0.5"), proxy.Seed(seed))
		c := newGoClient(t, nil)
		var got []int
		for range 20 {
			status, err := c.do(t, "GET", p.URL()+"/", nil)
			require.NoError(t, err)
			got = append(got, status)
		}
		return got
	}
	a, b := run(7), run(7)
	require.Equal(t, a, b)
	require.Contains(t, a, 503)
	require.Contains(t, a, 200)
}

// A request held by a fault past the guard, which the client never
// bounds, is cut and judged unbounded.
func TestUnbounded(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "delay-headers=1h path=/slow"), proxy.Guard(200*1e6))
	c := newGoClient(t, nil)
	_, err := c.do(t, "GET", p.URL()+"/slow", nil)
	require.Error(t, err)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished >= 1 }))
	rep := p.Report()
	require.True(t, rep.Failed())
	var found bool
	for _, v := range rep.Verdicts {
		if v.Name == "unbounded" {
			require.Equal(t, "fail", v.Result)
			found = true
		}
	}
	require.True(t, found)
}

// stall-body passes N bytes of the response, then stalls until the
// client goes away.
func TestStallBody(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 10000))
	})
	p := start(t, up.URL, rules(t, "stall-body=100"))
	req, err := http.NewRequestWithContext(testkit.Bounded(t), "GET", p.URL()+"/", nil)
	require.NoError(t, err)
	c := newGoClient(t, nil)
	resp, err := c.Do(req)
	require.NoError(t, err)
	buf := make([]byte, 100)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	resp.Body.Close() // the client gives up
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 1 }))
}

// idle-close closes a connection idle for T; the next request goes on a
// new one. No request is touched.
func TestIdleClose(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "idle-close=50ms"))
	c := newGoClient(t, nil)
	_, err := c.do(t, "GET", p.URL()+"/", nil)
	require.NoError(t, err)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	rep := p.Report()
	require.Equal(t, map[string]int{"proxy: fault": 1}, client(t, rep, "127.0.0.1").Closes)
	require.Equal(t, []string{"idle-close"}, client(t, rep, "127.0.0.1").List[0].Faults)
}

// go-dark: a connection idle for T swallows the next request; a client
// with a timeout gives up and closes it, which the proxy sees (what the
// client sends is read and dropped, not waited on): the client gave up.
func TestGoDark(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, "go-dark=50ms"))
	c := newGoClient(t, nil)
	c.Timeout = 300 * 1e6
	_, err := c.do(t, "GET", p.URL()+"/", nil)
	require.NoError(t, err)
	// Wait until the rule took the connection: the fault is counted.
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Faults == 1 }))
	_, err = c.do(t, "GET", p.URL()+"/", nil)
	require.Error(t, err)
	require.EqualValues(t, 1, up.requests.Load())
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	require.Equal(t, map[string]int{"client: client-gave-up": 1}, client(t, p.Report(), "127.0.0.1").Closes)
}

// The text's verdict lines keep their columns: each client starts where
// the others do, whatever the verdict's name.
func TestVerdictColumns(t *testing.T) {
	rep := &proxy.Report{Verdicts: []proxy.Verdict{
		{Name: "hidden-retry", Client: "127.0.0.1", Result: "pass"},
		{Name: "write-committed-twice", Client: "127.0.0.1", Result: "fail", Detail: "POST /orders twice"},
		{Name: "unbounded", Client: "127.0.0.1", Result: "skipped", Detail: "no -guard set"},
		{Name: "hidden-retry", Client: "127.0.0.1", Result: "finding", Class: "hidden-retry", Detail: "1 request"},
	}}
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	var at []int
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "  PASS ") || strings.HasPrefix(l, "  FAIL ") || strings.HasPrefix(l, "  SKIPPED ") ||
			strings.HasPrefix(l, "  FINDING ") {
			at = append(at, strings.Index(l, "127.0.0.1"))
		}
	}
	require.Len(t, at, 4, b.String())
	for _, n := range at {
		require.Equal(t, len("  SKIPPED ")+25, n, b.String())
	}
}
