// Package picture draws what the module recorded of connections and
// requests: connection lanes and a request's waterfall as one
// self-contained HTML page (inline SVG, no script, nothing fetched), and
// the same lanes in the Trace Event Format that Perfetto and
// chrome://tracing read. probe, trace, scenarios, serve and the pool's
// debug page share it.
//
// A picture is drawn from a [Set]: connections and requests as the JSON
// outputs list them, each with its times. It shows nothing those outputs
// do not hold. Every text in a Set is redacted by whoever built it; the
// page escapes it (html/template), the trace encodes it as JSON.
package picture

import (
	"time"
)

// Set is one picture's lanes: the connections of a probe, of a scenario,
// of a serve session's scenario, or of a pool.
type Set struct {
	// Title names the set ("probe http://127.0.0.1:8080/", a scenario's
	// name); Verdict, if set, is its verdict ("pass", "fail: …") and
	// Failed says whether it failed.
	Title   string
	Verdict string
	Failed  bool
	// Notes are lines shown under the title.
	Notes []string
	// Conns are the lanes, in the order drawn; Requests the bars.
	Conns    []Conn
	Requests []Request
	// Omitted counts the requests not drawn (past a bound), OmittedConns
	// the connections not listed.
	Omitted      int
	OmittedConns int
	// End is when the set was taken: a connection still open is drawn to
	// it. Zero: the latest time in the set.
	End time.Time
}

// Conn is a connection: a lane from its dial to its close.
type Conn struct {
	ID    uint64
	Label string // host, protocol: what the lane says of it
	// Dialed is when its dial began; FirstUse when it was first handed
	// to a request (zero: never); Closed when it closed (zero: open).
	Dialed, FirstUse, Closed time.Time
	// ClosedBy is "client" or "server"; Reason and Detail say why.
	ClosedBy, Reason, Detail string
	// DialError is set when the dial failed.
	DialError string
}

// Request is one attempt of a request on a connection: a bar split into
// its stages.
type Request struct {
	// ID is the attempt's id, unique in the set; Timeline the request's
	// timeline id (shared by a hidden retry's attempts).
	ID, Timeline uint64
	// Conn is the connection it was sent on, 0 if it got none.
	Conn  uint64
	Label string // method and redacted URL
	// Start and End bound the attempt.
	Start, End time.Time
	Stages     []Stage
	// Outcome is "ok" or the failure's class, stage and redacted error;
	// Failed is set when it failed, Status is the response status.
	Outcome string
	Failed  bool
	Status  int
	// RetryOf is the ID of the first attempt this one sends again (a
	// hidden retry, a retry policy's attempt), 0 if none; Retry says
	// which kind.
	RetryOf uint64
	Retry   string
	// Fault names the fault the request met, if known.
	Fault string
}

// Stage is one stage of a request: "get conn", "dns", "connect", "tls",
// "write", "server", "transfer".
type Stage struct {
	Name     string
	From, To time.Time
}

// Page is one HTML page: its sets of lanes, then a waterfall, if any.
type Page struct {
	Title     string
	Sets      []Set
	Waterfall *Request
	// Events are the waterfall's events, listed under it.
	Events []Event
}

// Event is one event of a waterfall's request.
type Event struct {
	At   time.Duration
	Text string
}

// stageNames are the stages in the order a request goes through them,
// each with its class in the page's style.
var stageNames = []string{"get conn", "dns", "connect", "tls", "write", "server", "transfer"}

// span is the time range a set covers.
func (s *Set) span() (from, to time.Time) {
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if t.After(to) {
			to = t
		}
	}
	for i := range s.Conns {
		c := &s.Conns[i]
		widen(c.Dialed)
		widen(c.FirstUse)
		widen(c.Closed)
	}
	for i := range s.Requests {
		widen(s.Requests[i].Start)
		widen(s.Requests[i].End)
	}
	widen(s.End)
	return from, to
}
