package proxy_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
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
