package proxy_test

import (
	"bytes"
	"encoding/json"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// connRuleRun has a Go client meet a connection rule (go-dark or
// idle-close at 50ms) once, on its kept-alive connection, and returns the
// report after the connection closed.
func connRuleRun(t *testing.T, rule string) (*proxy.Proxy, *proxy.Report) {
	t.Helper()
	up := newUpstream(t, nil)
	p := start(t, up.URL, rules(t, rule))
	c := newGoClient(t, nil)
	c.Timeout = 300 * time.Millisecond
	_, err := c.do(t, "GET", p.URL()+"/1", nil)
	require.NoError(t, err)
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Faults == 1 }))
	if rule == "go-dark=50ms" {
		_, err = c.do(t, "GET", p.URL()+"/2", nil) // swallowed: the client gives up
		require.Error(t, err)
	}
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Open == 0 }))
	return p, p.Report()
}

var liveFaults = regexp.MustCompile(` (\d+) faults?,`)

// A connection rule's fault is one of the client's faults: the client's
// count, the live line's and the JSON's agree with its connection's list.
func TestConnRuleFaultsCounted(t *testing.T) {
	for _, rule := range []string{"go-dark=50ms", "idle-close=50ms"} {
		t.Run(rule, func(t *testing.T) {
			p, rep := connRuleRun(t, rule)
			cl := client(t, rep, "127.0.0.1")
			require.Len(t, cl.List, 1)
			require.Len(t, cl.List[0].Faults, 1)
			require.Equal(t, 1, cl.Faults)
			line, _ := p.Live()
			m := liveFaults.FindStringSubmatch(line)
			require.NotNil(t, m, line)
			require.Equal(t, strconv.Itoa(cl.Faults), m[1], line)
			var b bytes.Buffer
			require.NoError(t, rep.WriteJSON(&b))
			var doc struct {
				Clients []struct {
					Faults int `json:"faults"`
				} `json:"clients"`
			}
			require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
			require.Len(t, doc.Clients, 1)
			require.Equal(t, 1, doc.Clients[0].Faults)
			b.Reset()
			require.NoError(t, rep.WriteText(&b))
			require.Contains(t, b.String(), "1 fault\n")
		})
	}
}

// The idle gap that ends in a connection rule's close, or in the dark, is
// the connection's idle time: at least the rule's 50ms, the timer's wait.
func TestConnRuleIdleCounted(t *testing.T) {
	for _, rule := range []string{"go-dark=50ms", "idle-close=50ms"} {
		t.Run(rule, func(t *testing.T) {
			_, rep := connRuleRun(t, rule)
			cl := client(t, rep, "127.0.0.1")
			require.Len(t, cl.List, 1)
			require.GreaterOrEqual(t, cl.List[0].MaxIdle, 50*time.Millisecond)
			require.Equal(t, cl.List[0].MaxIdle, cl.MaxIdle)
		})
	}
}

// A request the upstream did not answer (nothing listens at its port) is
// answered 502 by the proxy: the client's report counts it, with why.
func TestProxyAnswersCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := start(t, "http://"+addr)
	c := newGoClient(t, nil)
	status, err := c.do(t, "GET", p.URL()+"/x", nil)
	require.NoError(t, err)
	require.Equal(t, 502, status)
	c.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(testkit.Bounded(t), p, func(c proxy.Counts) bool { return c.Finished == 1 }))
	cl := client(t, p.Report(), "127.0.0.1")
	require.Len(t, cl.Answered, 1, cl.Answered)
	for k, n := range cl.Answered {
		require.Equal(t, 1, n)
		require.True(t, strings.HasPrefix(k, "502 "), k)
		require.Contains(t, k, "connection refused")
	}
	var b bytes.Buffer
	require.NoError(t, p.Report().WriteText(&b))
	require.Contains(t, b.String(), "    answered by the proxy ×1: 502 ")
	b.Reset()
	require.NoError(t, p.Report().WriteJSON(&b))
	require.Contains(t, b.String(), `"proxy_answered"`)
}

// A hidden retry of an idempotent request is a finding: said under its
// class in the text and the JSON, in its JUnit case's system-out, and
// failing nothing.
func TestHiddenRetryFinding(t *testing.T) {
	_, _, rep := resetSecondGET(t)
	var v proxy.Verdict
	for _, x := range rep.Verdicts {
		if x.Name == "hidden-retry" {
			v = x
		}
	}
	require.Equal(t, "finding", v.Result)
	require.Equal(t, "hidden-retry", v.Class)
	require.NotEmpty(t, v.Detail)
	require.False(t, rep.Failed())
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), "  FINDING hidden-retry ")
	require.NotContains(t, b.String(), "PASS    hidden-retry")
	b.Reset()
	require.NoError(t, rep.WriteJUnit(&b))
	require.Contains(t, b.String(), "<system-out>finding (hidden-retry): "+v.Detail)
}

// JUnit's time is a number of seconds on every suite and case.
func TestJUnitTimes(t *testing.T) {
	rep := &proxy.Report{Elapsed: 1500 * time.Millisecond, Verdicts: []proxy.Verdict{
		{Name: "unbounded", Client: "a", Result: "pass"}, {Name: "unbounded", Client: "b", Result: "skipped"}}}
	var b bytes.Buffer
	require.NoError(t, rep.WriteJUnit(&b))
	times := regexp.MustCompile(`time="([^"]*)"`).FindAllStringSubmatch(b.String(), -1)
	require.Len(t, times, 4, b.String())
	for _, m := range times {
		_, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err, b.String())
	}
	require.Contains(t, b.String(), `time="1.500"`)
}

// The upstream pool's connections the proxy's own transport closes (at
// its close) are closed by the proxy, not by a client.
func TestUpstreamClosedByProxy(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up.URL)
	c := newGoClient(t, nil)
	_, err := c.do(t, "GET", p.URL()+"/x", nil)
	require.NoError(t, err)
	c.tr.CloseIdleConnections()
	require.NoError(t, p.Close())
	rep := p.Report()
	require.Equal(t, 1, rep.Pool.Conns)
	require.Len(t, rep.Pool.Closes, 1, rep.Pool.Closes)
	for k := range rep.Pool.Closes {
		require.True(t, strings.HasPrefix(k, "proxy: "), k)
	}
	require.Equal(t, "proxy", rep.Pool.List[0].ClosedBy)
}
