package picture_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/picture"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }

// A connection the server closed after one request: a page with its lane,
// the request's bar and the close's reason.
func ExampleWriteHTML() {
	set := picture.Set{Title: "GET http://127.0.0.1:8080/",
		Conns: []picture.Conn{{ID: 1, Label: "HTTP/1.1", Dialed: ms(0), FirstUse: ms(2), Closed: ms(30),
			ClosedBy: "server", Reason: "server-eof"}},
		Requests: []picture.Request{{ID: 1, Timeline: 1, Conn: 1, Label: "GET http://127.0.0.1:8080/",
			Start: ms(0), End: ms(10), Outcome: "ok: 200", Status: 200,
			Stages: []picture.Stage{{Name: "connect", From: ms(0), To: ms(2)}, {Name: "server", From: ms(3), To: ms(9)}}}},
	}
	var b strings.Builder
	if err := picture.WriteHTML(&b, picture.Page{Title: "connaudit probe", Sets: []picture.Set{set}}); err != nil {
		panic(err)
	}
	page := b.String()
	fmt.Println("lanes:", strings.Count(page, `<g class="lane`))
	fmt.Println("bars:", strings.Count(page, `<g class="req`))
	fmt.Println(regexp.MustCompile(`<tspan class="reason">[^<]*</tspan><tspan>[^<]*</tspan>`).FindString(page))
	fmt.Println("scripts:", strings.Count(page, "<script"))
	// Output:
	// lanes: 1
	// bars: 1
	// <tspan class="reason">server-eof</tspan><tspan> by server</tspan>
	// scripts: 0
}

// The same connection in the Trace Event Format: its track's name, the
// dial, the request's slice with its stage nested in it, the close.
func ExampleWriteTrace() {
	set := picture.Set{Title: "probe",
		Conns: []picture.Conn{{ID: 1, Dialed: ms(0), Closed: ms(30), ClosedBy: "server", Reason: "server-eof"}},
		Requests: []picture.Request{{ID: 1, Timeline: 1, Conn: 1, Label: "GET /", Start: ms(0), End: ms(10),
			Outcome: "ok: 200", Status: 200, Stages: []picture.Stage{{Name: "server", From: ms(3), To: ms(9)}}}},
	}
	if err := picture.WriteTrace(os.Stdout, []picture.Set{set}); err != nil {
		panic(err)
	}
	// Output:
	// {"displayTimeUnit":"ms","traceEvents":[
	// {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"probe"}},{"name":"process_sort_index","ph":"M","pid":1,"tid":0,"args":{"sort_index":1}},{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"#1"}},{"name":"thread_sort_index","ph":"M","pid":1,"tid":1,"args":{"sort_index":64}},{"name":"dial","cat":"conn","ph":"i","s":"t","pid":1,"tid":1,"ts":0.000,"args":{"label":""}},{"name":"close: server-eof","cat":"close","ph":"i","s":"t","pid":1,"tid":1,"ts":30000.000,"args":{"closed_by":"server","detail":"","reason":"server-eof"}},{"name":"GET /","cat":"request","ph":"X","pid":1,"tid":1,"ts":0.000,"dur":10000.000,"args":{"conn":1,"outcome":"ok: 200","request":1,"status":200}},{"name":"server","cat":"stage","ph":"X","pid":1,"tid":1,"ts":3000.000,"dur":6000.000}
	// ]}
}

// A timeline the Transport sent twice, on connection 7 and then on 8 (a
// hidden retry): two bars, the second linked to the first.
func ExampleAttempts() {
	tl := &httptrace.Timeline{ID: 3, Method: "GET", Start: start, Finished: true, Status: 200,
		Outcome: httptrace.Outcome{Class: httptrace.ClassOK},
		Events: []httptrace.Event{
			{Kind: httptrace.KindGetConn, At: 0},
			{Kind: httptrace.KindGotConn, At: time.Millisecond, Conn: 7},
			{Kind: httptrace.KindGetConn, At: 2 * time.Millisecond},
			{Kind: httptrace.KindGotConn, At: 4 * time.Millisecond, Conn: 8},
			{Kind: httptrace.KindFirstByte, At: 6 * time.Millisecond},
			{Kind: httptrace.KindBodyEOF, At: 7 * time.Millisecond},
		}}
	for _, r := range picture.Attempts(tl) {
		fmt.Printf("attempt %d on #%d, %v: %s (retry of %d)\n", r.ID, r.Conn, r.End.Sub(r.Start), r.Outcome, r.RetryOf)
	}
	// Output:
	// attempt 48 on #7, 1ms: sent again on another connection: the Transport's hidden retry (retry of 0)
	// attempt 49 on #8, 5ms: ok: 200 (retry of 48)
}
