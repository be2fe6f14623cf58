package pictures_test

import (
	"fmt"
	"time"

	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/probe"
	"github.com/connaudit/connaudit/serve"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }

// A probe's report: a lane per connection it lists, with the times and
// the close its JSON holds.
func ExampleProbe() {
	rep := &probe.Result{Method: "GET", Target: "http://127.0.0.1:8080/?token=REDACTED", Requests: 40, Dials: 2,
		Connections: []probe.Connection{
			{ID: 1, Proto: "HTTP/1.1", DialedAt: ms(0), FirstUsedAt: ms(1), ClosedAt: ms(50),
				ClosedBy: pool.ClosedByServer, CloseReason: pool.ReasonConnectionClose},
			{ID: 2, Proto: "HTTP/1.1", DialedAt: ms(50), FirstUsedAt: ms(51)},
		}}
	s := pictures.Probe(rep, nil, 0)
	fmt.Println(s.Title)
	fmt.Println(s.Notes[0])
	for _, c := range s.Conns {
		fmt.Printf("#%d %s, closed by %q: %q\n", c.ID, c.Label, c.ClosedBy, c.Reason)
	}
	// Output:
	// probe GET http://127.0.0.1:8080/?token=REDACTED
	// 40 requests on 2 connections (2 dialed)
	// #1 HTTP/1.1, closed by "server": "connection-close"
	// #2 HTTP/1.1, closed by "": ""
}

// A serve session's report: a set per scenario, a lane per connection
// the server saw, a mark per request it read.
func ExampleSession() {
	rep := &serve.SessionReport{Session: "s1-7f3a", Client: serve.Client{Name: "curl", Version: "8.5"},
		Results: []serve.Result{{Name: "reset", Fault: "reset", Verdict: "pass", Pass: true,
			Server: serve.Evidence{Connections: []serve.ConnEvidence{{ID: 1, Requests: 1, ClosedBy: "server", How: "rst",
				AcceptedAt: ms(0), FirstRequestAt: ms(1), ClosedAt: ms(2), RequestsAt: []time.Time{ms(1)}}}}}}}
	for _, s := range pictures.Session(rep) {
		fmt.Printf("%s (%s): %d lane(s), %d request(s)\n", s.Title, s.Verdict, len(s.Conns), len(s.Requests))
		for _, c := range s.Conns {
			fmt.Printf("#%d closed by %s: %s\n", c.ID, c.ClosedBy, c.Reason)
		}
	}
	// Output:
	// curl 8.5 s1-7f3a: reset (pass): 1 lane(s), 1 request(s)
	// #1 closed by server: rst
}

// No timeline: an empty page, no waterfall.
func ExampleTrace() {
	pg := pictures.Trace(nil)
	fmt.Println(pg.Title, len(pg.Sets), pg.Waterfall == nil)
	// Output:
	// connaudit trace 0 true
}
