package picture

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// sample is a set of three connections: one the server closed, one the
// client closed, one still open, with a failed request sent again on the
// open one and two overlapping requests (HTTP/2 streams) on the first.
func sample() Set {
	return Set{
		Title: "sample", Verdict: "fail: a hidden retry", Failed: true, End: at(100),
		Conns: []Conn{
			{ID: 1, Label: "127.0.0.1:80 h2", Dialed: at(0), FirstUse: at(2), Closed: at(50), ClosedBy: "server", Reason: "server-closed-idle"},
			{ID: 2, Label: "127.0.0.1:80 HTTP/1.1", Dialed: at(10), FirstUse: at(11), Closed: at(60), ClosedBy: "client", Reason: "request-error", Detail: "reset"},
			{ID: 3, Label: "127.0.0.1:80 HTTP/1.1", Dialed: at(61), FirstUse: at(62)},
		},
		Requests: []Request{
			{ID: 16, Timeline: 1, Conn: 1, Label: "GET /a", Start: at(0), End: at(20), Outcome: "ok: 200", Status: 200,
				Stages: []Stage{{"get conn", at(0), at(2)}, {"connect", at(0.5), at(1.5)}, {"server", at(3), at(15)}, {"transfer", at(15), at(20)}}},
			{ID: 32, Timeline: 2, Conn: 1, Label: "GET /b", Start: at(5), End: at(25), Outcome: "ok: 200", Status: 200},
			{ID: 48, Timeline: 3, Conn: 2, Label: "GET /c", Start: at(11), End: at(59), Outcome: "sent again", Failed: true},
			{ID: 49, Timeline: 3, Conn: 3, Label: "GET /c", Start: at(61), End: at(70), Outcome: "ok: 200", RetryOf: 48, Retry: "hidden retry"},
		},
	}
}

func TestHTMLLanes(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, Page{Title: "t", Sets: []Set{sample()}}))
	page := b.String()
	require.Equal(t, 3, strings.Count(page, `<g class="lane`), "a lane per connection")
	require.Equal(t, 4, strings.Count(page, `<g class="req`), "a bar per attempt")
	require.Equal(t, 2, strings.Count(page, `<g class="req failed`)+strings.Count(page, `class="lane failed`)+
		strings.Count(page, `class="verdict fail`), "the failed attempt and the failed verdict")
	require.Contains(t, page, `<tspan class="reason">server-closed-idle</tspan><tspan> by server</tspan>`)
	require.Contains(t, page, `<tspan class="reason">request-error</tspan><tspan> by client</tspan><tspan> reset</tspan>`)
	require.Equal(t, 1, strings.Count(page, `class="cs"`), "one close by the server")
	require.Equal(t, 1, strings.Count(page, `class="cc"`), "one close by the client")
	require.Equal(t, 1, strings.Count(page, `<path class="link"`), "the retry linked to its first attempt")
	require.Contains(t, page, "hidden retry of attempt 48")
	require.Contains(t, page, "closed &#43;50.000ms by server: server-closed-idle")
	selfContained(t, page)
}

// selfContained fails unless page loads nothing: no script, no link, no
// source, no style's import or URL.
func selfContained(t *testing.T, page string) {
	t.Helper()
	lower := strings.ToLower(page)
	for _, bad := range []string{"<script", ` src="`, ` href="`, "url(", "@import", "<link", "<iframe", "<img", "<object", "<embed"} {
		require.NotContains(t, lower, bad)
	}
	require.Equal(t, strings.Count(lower, "http://www.w3.org/2000/svg"), strings.Count(lower, "http://"),
		"no address but SVG's namespace")
}

func TestHTMLEscapes(t *testing.T) {
	s := sample()
	s.Title = `<script>alert(1)</script>`
	s.Conns[0].Reason = `"><img src=x>`
	s.Requests[0].Label = "GET /\x1b[31m</title><script>"
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, Page{Title: "\u202e", Sets: []Set{s}}))
	selfContained(t, b.String())
	require.NotContains(t, b.String(), "\x1b")
	require.NotContains(t, b.String(), "\u202e")
}

func TestHTMLBounded(t *testing.T) {
	s := Set{Title: "many"}
	for i := range MaxRequests + 5 {
		s.Requests = append(s.Requests, Request{ID: uint64(i + 1), Start: at(float64(i)), End: at(float64(i) + 0.5)})
	}
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, Page{Sets: []Set{s}}))
	require.Equal(t, MaxRequests, strings.Count(b.String(), `<g class="req`))
	require.Contains(t, b.String(), "not drawn: 5 request(s)")
	require.Equal(t, 1, strings.Count(b.String(), `<g class="lane`), "one lane for the requests that got no connection")
}

func TestWaterfall(t *testing.T) {
	r := sample().Requests[0]
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, Page{Title: "GET /a", Waterfall: &r, Events: []Event{{At: time.Millisecond, Text: "got-conn conn=#1"}}}))
	page := b.String()
	require.Equal(t, len(r.Stages)+1, strings.Count(page, `<g class="row"`), "a row per stage and the total")
	require.Contains(t, page, "<title>server 12.000ms</title>")
	require.Contains(t, page, "<title>total 20.000ms</title>")
	require.Contains(t, page, "got-conn conn=#1")
	selfContained(t, page)
}

type traceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func TestTrace(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteTrace(&b, []Set{sample()}))
	var f traceFile
	dec := json.NewDecoder(&b)
	require.NoError(t, dec.Decode(&f))
	count := map[string]int{}
	tracks := map[string]bool{}
	type iv struct{ a, b float64 }
	byTid := map[int][]iv{}
	for _, e := range f.TraceEvents {
		count[e.Ph+" "+e.Cat]++
		if e.Name == "thread_name" {
			tracks[e.Args["name"].(string)] = true
		}
		if e.Ph == "X" && e.Cat == "request" {
			for _, o := range byTid[e.Tid] {
				require.False(t, e.Ts < o.b && o.a < e.Ts+e.Dur, "requests on one track overlap: %v", e)
			}
			byTid[e.Tid] = append(byTid[e.Tid], iv{e.Ts, e.Ts + e.Dur})
		}
	}
	require.Equal(t, 4, count["X request"], "a slice per attempt")
	require.Equal(t, 4, count["X stage"], "a slice per stage")
	require.Equal(t, 3, count["i conn"], "a dial per connection")
	require.Equal(t, 2, count["i close"], "a close per closed connection")
	require.Equal(t, 1, count["i fault"], "an instant per failed attempt")
	require.Equal(t, 1, count["s retry"])
	require.Equal(t, 1, count["f retry"])
	require.Equal(t, map[string]bool{"#1": true, "#1 ·2": true, "#2": true, "#3": true}, tracks,
		"the two overlapping requests of #1 on two tracks")
}

func TestTraceWriterError(t *testing.T) {
	tw := NewTraceWriter(failing{}, t0)
	for _, r := range sample().Requests {
		tw.Request(r)
	}
	require.Error(t, tw.Close())
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("full") }

// TestAttempts draws a timeline the Transport sent twice: on connection 7,
// which failed, then on 8.
func TestAttempts(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tl := &httptrace.Timeline{ID: 5, Method: "GET", Start: t0, Finished: true, Status: 200,
		Outcome: httptrace.Outcome{Class: httptrace.ClassOK},
		Events: []httptrace.Event{
			{Kind: httptrace.KindGetConn, At: 0},
			{Kind: httptrace.KindGotConn, At: ms(1), Conn: 7},
			{Kind: httptrace.KindWroteRequest, At: ms(2)},
			{Kind: httptrace.KindGetConn, At: ms(3)},
			{Kind: httptrace.KindConnectStart, At: ms(3.5)},
			{Kind: httptrace.KindConnectDone, At: ms(4)},
			{Kind: httptrace.KindGotConn, At: ms(4.5), Conn: 8},
			{Kind: httptrace.KindWroteRequest, At: ms(5)},
			{Kind: httptrace.KindFirstByte, At: ms(6)},
			{Kind: httptrace.KindBodyEOF, At: ms(7)},
			{Kind: httptrace.KindDone, At: ms(7)},
			{Kind: httptrace.KindBodyClose, At: ms(9), Late: true},
		}}
	tl.Conn.ID = 8
	rs := Attempts(tl)
	require.Len(t, rs, 2)
	require.Equal(t, uint64(7), rs[0].Conn)
	require.True(t, rs[0].Failed)
	require.Equal(t, at(3), rs[1].Start, "the second attempt begins at its get-conn")
	require.Equal(t, at(7), rs[1].End, "a late event is not drawn")
	require.Equal(t, uint64(8), rs[1].Conn)
	require.Equal(t, rs[0].ID, rs[1].RetryOf)
	require.Equal(t, "ok: 200", rs[1].Outcome)
	var names []string
	for _, s := range rs[1].Stages {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"get conn", "connect", "write", "server", "transfer"}, names)
	require.Len(t, Lanes(rs), 2)
}
