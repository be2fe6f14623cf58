package picture

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
)

// TraceWriter writes lanes in the Trace Event Format (the JSON Object
// Format that Perfetto and chrome://tracing read) as they come, so that a
// run of any length costs the memory of its connections, not of its
// requests: each connection is a track (a thread of a process per set),
// each request attempt a slice, its stages slices nested in it, a dial, a
// close and a failure an instant event, a request sent again a flow from
// its first attempt. Requests that overlap on one connection (HTTP/2
// streams) go on the connection's next track, "#ID ·2", so that slices
// on a track nest. Calls are not safe for concurrent use.
type TraceWriter struct {
	w      *bufio.Writer
	origin time.Time
	n      int
	err    error
	pid    int
	tid    int
	conns  map[uint64][]*track // the current set's, by connection
	// recent holds the tracks and ends of recent attempts, for the flows
	// of those sent again (bounded: cleared when full).
	recent map[uint64]flowEnd
	flows  int
}

type track struct {
	tid     int
	lastEnd int64 // ns from origin
}

type flowEnd struct {
	tid int
	at  int64
}

// maxRecent bounds TraceWriter.recent.
const maxRecent = 4096

// NewTraceWriter starts a trace on w whose times count from origin.
func NewTraceWriter(w io.Writer, origin time.Time) *TraceWriter {
	t := &TraceWriter{w: bufio.NewWriterSize(w, 64<<10), origin: origin, recent: map[uint64]flowEnd{}}
	_, t.err = t.w.WriteString(`{"displayTimeUnit":"ms","traceEvents":[` + "\n")
	return t
}

// Set begins a set: a process named title, whose tracks are its
// connections.
func (t *TraceWriter) Set(title string) {
	t.pid++
	t.conns = map[uint64][]*track{}
	t.meta("process_name", 0, clean(title))
	t.metaN("process_sort_index", 0, t.pid)
}

func (t *TraceWriter) ns(at time.Time) int64 { return int64(at.Sub(t.origin)) }

// trackFor returns a track of conn free from `from` on, making one if
// none is.
func (t *TraceWriter) trackFor(conn uint64, from int64) *track {
	if t.pid == 0 {
		t.Set("connections")
	}
	ts := t.conns[conn]
	for _, tr := range ts {
		if tr.lastEnd <= from {
			return tr
		}
	}
	t.tid++
	tr := &track{tid: t.tid, lastEnd: from}
	t.conns[conn] = append(ts, tr)
	name := "no connection"
	if conn != 0 {
		name = "#" + strconv.FormatUint(conn, 10)
	}
	if len(ts) > 0 {
		name += " ·" + strconv.Itoa(len(ts)+1)
	}
	t.meta("thread_name", tr.tid, name)
	// Tracks sort by connection, then by their order.
	t.metaN("thread_sort_index", tr.tid, int(min(conn, 1<<40))*64+min(len(ts), 63))
	return tr
}

// Conn writes what is known of a connection: its dial, and its close or
// failed dial, as instant events on its first track.
func (t *TraceWriter) Conn(c Conn) {
	if c.Dialed.IsZero() {
		return
	}
	tr := t.trackFor(c.ID, t.ns(c.Dialed))
	if ts := t.conns[c.ID]; len(ts) > 0 {
		tr = ts[0]
	}
	t.instant(tr.tid, "dial", "conn", t.ns(c.Dialed), map[string]any{"label": clean(c.Label)})
	switch {
	case c.DialError != "":
		t.instant(tr.tid, "dial failed", "fault", t.ns(c.Dialed), map[string]any{"error": clean(c.DialError)})
	case !c.Closed.IsZero():
		t.instant(tr.tid, "close: "+clean(c.Reason), "close", t.ns(c.Closed), map[string]any{
			"closed_by": clean(c.ClosedBy), "reason": clean(c.Reason), "detail": clean(c.Detail)})
	}
}

// Request writes one attempt: its slice, its stages nested in it, an
// instant event if it failed, a flow from its first attempt if it was
// sent again.
func (t *TraceWriter) Request(r Request) {
	start, end := t.ns(r.Start), max(t.ns(r.End), t.ns(r.Start))
	tr := t.trackFor(r.Conn, start)
	tr.lastEnd = max(tr.lastEnd, end)
	args := map[string]any{"request": r.Timeline, "conn": r.Conn, "outcome": clean(r.Outcome)}
	if r.Status != 0 {
		args["status"] = r.Status
	}
	if r.Fault != "" {
		args["fault"] = clean(r.Fault)
	}
	t.slice(tr.tid, clean(r.Label), "request", start, end-start, args)
	for _, st := range r.Stages {
		a, b := t.ns(st.From), t.ns(st.To)
		if a < start || b > end || b < a {
			continue // a slice must nest in its request's
		}
		t.slice(tr.tid, st.Name, "stage", a, b-a, nil)
	}
	if r.Failed {
		t.instant(tr.tid, "failed", "fault", end, map[string]any{"outcome": clean(r.Outcome)})
	}
	if r.RetryOf != 0 {
		if p, ok := t.recent[r.RetryOf]; ok {
			t.flows++
			id := strconv.Itoa(t.flows)
			t.event(`{"name":` + quote(r.Retry) + `,"cat":"retry","ph":"s","id":` + id + `,"pid":` + strconv.Itoa(t.pid) +
				`,"tid":` + strconv.Itoa(p.tid) + `,"ts":` + us(p.at) + `}`)
			t.event(`{"name":` + quote(r.Retry) + `,"cat":"retry","ph":"f","bp":"e","id":` + id + `,"pid":` +
				strconv.Itoa(t.pid) + `,"tid":` + strconv.Itoa(tr.tid) + `,"ts":` + us(start) + `}`)
		}
	}
	if len(t.recent) >= maxRecent {
		clear(t.recent)
	}
	t.recent[r.ID] = flowEnd{tid: tr.tid, at: max(start, end-1)}
}

// Close ends the trace's JSON and flushes it.
func (t *TraceWriter) Close() error {
	if t.err == nil {
		_, t.err = t.w.WriteString("\n]}\n")
	}
	if err := t.w.Flush(); t.err == nil {
		t.err = err
	}
	return t.err
}

func (t *TraceWriter) slice(tid int, name, cat string, at, dur int64, args map[string]any) {
	s := `{"name":` + quote(name) + `,"cat":"` + cat + `","ph":"X","pid":` + strconv.Itoa(t.pid) + `,"tid":` +
		strconv.Itoa(tid) + `,"ts":` + us(at) + `,"dur":` + us(dur)
	if args != nil {
		s += `,"args":` + marshal(args)
	}
	t.event(s + "}")
}

func (t *TraceWriter) instant(tid int, name, cat string, at int64, args map[string]any) {
	t.event(`{"name":` + quote(name) + `,"cat":"` + cat + `","ph":"i","s":"t","pid":` + strconv.Itoa(t.pid) +
		`,"tid":` + strconv.Itoa(tid) + `,"ts":` + us(at) + `,"args":` + marshal(args) + "}")
}

func (t *TraceWriter) meta(name string, tid int, value string) {
	t.event(`{"name":"` + name + `","ph":"M","pid":` + strconv.Itoa(t.pid) + `,"tid":` + strconv.Itoa(tid) +
		`,"args":{"name":` + quote(value) + `}}`)
}

func (t *TraceWriter) metaN(name string, tid int, n int) {
	t.event(`{"name":"` + name + `","ph":"M","pid":` + strconv.Itoa(t.pid) + `,"tid":` + strconv.Itoa(tid) +
		`,"args":{"sort_index":` + strconv.Itoa(n) + `}}`)
}

func (t *TraceWriter) event(s string) {
	if t.err != nil {
		return
	}
	if t.n > 0 {
		if t.err = t.w.WriteByte(','); t.err != nil {
			return
		}
		if t.n%8 == 0 {
			t.err = t.w.WriteByte('\n')
		}
	}
	t.n++
	if t.err == nil {
		_, t.err = t.w.WriteString(s)
	}
}

// us writes ns nanoseconds as microseconds, the format's unit, to the
// nanosecond.
func us(ns int64) string {
	neg := ""
	if ns < 0 {
		neg, ns = "-", -ns
	}
	frac := strconv.FormatInt(ns%1000, 10)
	for len(frac) < 3 {
		frac = "0" + frac
	}
	return neg + strconv.FormatInt(ns/1000, 10) + "." + frac
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func marshal(args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// WriteTrace writes the sets as one trace, each a process, with times
// from the earliest of them.
func WriteTrace(w io.Writer, sets []Set) error {
	if w == nil {
		return errors.New("picture: WriteTrace: nil writer")
	}
	var origin time.Time
	for i := range sets {
		if f, _ := sets[i].span(); !f.IsZero() && (origin.IsZero() || f.Before(origin)) {
			origin = f
		}
	}
	t := NewTraceWriter(w, origin)
	for i := range sets {
		s := &sets[i]
		title := s.Title
		if s.Verdict != "" {
			title += ": " + s.Verdict
		}
		t.Set(title)
		for _, c := range s.Conns {
			t.Conn(c)
		}
		for _, r := range s.Requests {
			t.Request(r)
		}
	}
	return t.Close()
}
