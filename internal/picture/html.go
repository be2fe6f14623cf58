package picture

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
)

// The page's geometry, in pixels.
const (
	labelW = 150 // the lanes' labels
	plotW  = 900 // the time axis
	whyW   = 300 // the close reasons
	laneH  = 16
	axisH  = 24
)

// MaxRequests bounds the bars a set draws: past it the page counts the
// rest instead (a probe of 100,000 requests goes to the trace file).
const MaxRequests = 20000

// WriteHTML writes p as one self-contained HTML page: inline SVG and
// style, no script, nothing fetched.
func WriteHTML(w io.Writer, p Page) error {
	if w == nil {
		return errors.New("picture: WriteHTML: nil writer")
	}
	v := pageView{Title: clean(p.Title), Stages: stageNames}
	for i := range p.Sets {
		v.Sets = append(v.Sets, setView(&p.Sets[i]))
	}
	if p.Waterfall != nil {
		v.Waterfall = waterfallView(p.Waterfall, p.Events)
	}
	return page.Execute(w, v)
}

// clean makes a text from outside safe to show: one line, printable.
func clean(s string) string { return redact.Printable(s) }

type pageView struct {
	Title     string
	Stages    []string
	Sets      []setV
	Waterfall *waterfallV
}

type setV struct {
	Title, Verdict string
	Failed         bool
	Notes          []string
	W, H           int
	Axis           []tick
	Lanes          []laneV
	Links          []linkV
	Conns, Reqs    int
	Omitted        string
	// Chunks are the lanes in SVGs of chunkLanes each: the browser lays
	// out and paints only those on screen (content-visibility), so that
	// a page of thousands of connections opens at once.
	Chunks []chunkV
}

// chunkV is one SVG of a set's lanes.
type chunkV struct {
	Y0, H int
	Lanes []laneV
	Links []linkV
}

// chunkLanes is the number of lanes per SVG.
const chunkLanes = 100

type tick struct {
	X     float64
	Label string
}

type laneV struct {
	ID                    uint64
	Y, TextY              int
	Label, Title          string
	X0, XUse, X1          float64
	Open, Failed          bool
	ClosedBy, Reason, Why string
	Bars                  []barV
	NoConn                bool
}

type barV struct {
	X, W   float64
	Title  string
	Failed bool
	Stages []stageV
}

type stageV struct {
	Class int
	X, W  float64
}

type linkV struct {
	X1, Y1, X2, Y2 float64
	Title          string
}

// scale maps times onto the plot.
type scale struct {
	from time.Time
	d    time.Duration
}

func (s scale) x(t time.Time) float64 {
	if s.d <= 0 {
		return labelW
	}
	return round1(labelW + plotW*float64(t.Sub(s.from))/float64(s.d))
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func setView(s *Set) setV {
	from, to := s.span()
	sc := scale{from: from, d: to.Sub(from)}
	v := setV{Title: clean(s.Title), Verdict: clean(s.Verdict), Failed: s.Failed, W: labelW + plotW + whyW,
		Conns: len(s.Conns), Reqs: len(s.Requests)}
	for _, n := range s.Notes {
		v.Notes = append(v.Notes, clean(n))
	}
	v.Axis = ticks(sc)
	reqs := s.Requests
	omitted := s.Omitted
	if len(reqs) > MaxRequests {
		omitted += len(reqs) - MaxRequests
		reqs = reqs[:MaxRequests]
	}
	if omitted > 0 || s.OmittedConns > 0 {
		v.Omitted = fmt.Sprintf("not drawn: %d request(s) and %d connection(s) past the page's bounds (the trace file has every request)",
			omitted, s.OmittedConns)
	}
	row := map[uint64]int{}
	y := axisH
	var noConn *laneV
	for _, r := range reqs {
		if r.Conn == 0 && noConn == nil {
			noConn = &laneV{Label: "no connection", Title: "requests that got no connection", NoConn: true}
		}
	}
	if noConn != nil {
		noConn.Y, noConn.TextY = y, y+laneH-4
		y += laneH
		v.Lanes = append(v.Lanes, *noConn)
		row[0] = 0
	}
	for i := range s.Conns {
		c := &s.Conns[i]
		l := laneV{ID: c.ID, Y: y, TextY: y + laneH - 4, Label: clean(fmt.Sprintf("#%d %s", c.ID, c.Label))}
		y += laneH
		l.X0 = sc.x(c.Dialed)
		l.XUse = l.X0
		if !c.FirstUse.IsZero() {
			l.XUse = sc.x(c.FirstUse)
		}
		end := c.Closed
		if end.IsZero() {
			end, l.Open = to, true
		}
		l.X1 = max(sc.x(end), l.X0+1)
		l.ClosedBy, l.Reason = clean(c.ClosedBy), clean(c.Reason)
		switch {
		case c.DialError != "":
			l.Failed, l.Reason, l.Why = true, "dial failed", clean(c.DialError)
		case l.Open:
			l.Why = "open"
		case c.Detail != "":
			l.Why = clean(c.Detail)
		}
		l.Title = laneTitle(c, from)
		if _, dup := row[c.ID]; !dup {
			row[c.ID] = len(v.Lanes)
		}
		v.Lanes = append(v.Lanes, l)
	}
	// A request on a connection not listed gets a lane of its own, known
	// from its requests alone.
	for _, r := range reqs {
		if _, ok := row[r.Conn]; ok {
			continue
		}
		l := laneV{ID: r.Conn, Y: y, TextY: y + laneH - 4, Label: fmt.Sprintf("#%d", r.Conn),
			Title: fmt.Sprintf("connection #%d: not listed; drawn from its requests", r.Conn), Open: true, Why: "not listed"}
		y += laneH
		l.X0, l.XUse, l.X1 = sc.x(r.Start), sc.x(r.Start), sc.x(to)
		row[r.Conn] = len(v.Lanes)
		v.Lanes = append(v.Lanes, l)
	}
	at := map[uint64][2]float64{} // a first attempt's end: x, y
	for _, r := range reqs {
		li := row[r.Conn]
		l := &v.Lanes[li]
		b := barV{X: sc.x(r.Start), Failed: r.Failed, Title: reqTitle(&r, from)}
		b.W = max(round1(sc.x(r.End)-b.X), 0.5)
		for _, st := range r.Stages {
			x := sc.x(st.From)
			b.Stages = append(b.Stages, stageV{Class: stageClass(st.Name), X: x, W: max(round1(sc.x(st.To)-x), 0.3)})
		}
		l.Bars = append(l.Bars, b)
		mid := float64(l.Y) + laneH/2
		if _, ok := at[r.ID]; !ok {
			at[r.ID] = [2]float64{b.X + b.W, mid}
		}
		if r.RetryOf != 0 {
			if p, ok := at[r.RetryOf]; ok {
				v.Links = append(v.Links, linkV{X1: p[0], Y1: p[1], X2: b.X, Y2: mid,
					Title: clean(fmt.Sprintf("%s of attempt %d", r.Retry, r.RetryOf))})
			}
		}
	}
	v.H = y + 4
	for i := 0; i < len(v.Lanes); i += chunkLanes {
		ls := v.Lanes[i:min(i+chunkLanes, len(v.Lanes))]
		c := chunkV{Y0: ls[0].Y, H: ls[len(ls)-1].Y + laneH - ls[0].Y, Lanes: ls}
		for _, l := range v.Links {
			if l.Y2 >= float64(c.Y0) && l.Y2 < float64(c.Y0+c.H) && l.Y1 >= float64(c.Y0) && l.Y1 < float64(c.Y0+c.H) {
				c.Links = append(c.Links, l)
			}
		}
		v.Chunks = append(v.Chunks, c)
	}
	return v
}

func stageClass(name string) int {
	for i, n := range stageNames {
		if n == name {
			return i
		}
	}
	return len(stageNames)
}

// off is t as an offset from the set's start, in milliseconds.
func off(t, from time.Time) string {
	return fmt.Sprintf("+%.3fms", float64(t.Sub(from))/float64(time.Millisecond))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

func laneTitle(c *Conn, from time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "connection #%d %s\ndialed %s", c.ID, c.Label, off(c.Dialed, from))
	if !c.FirstUse.IsZero() {
		fmt.Fprintf(&b, ", first used %s", off(c.FirstUse, from))
	} else {
		b.WriteString(", never used")
	}
	switch {
	case c.DialError != "":
		fmt.Fprintf(&b, "\ndial failed: %s", c.DialError)
	case c.Closed.IsZero():
		b.WriteString("\nopen")
	default:
		fmt.Fprintf(&b, "\nclosed %s by %s: %s", off(c.Closed, from), c.ClosedBy, c.Reason)
		if c.Detail != "" {
			fmt.Fprintf(&b, " (%s)", c.Detail)
		}
	}
	return cleanLines(b.String())
}

// cleanLines is clean line by line: a title keeps its breaks, and no line
// can hide the others.
func cleanLines(s string) string {
	var out strings.Builder
	for l := range strings.Lines(s) {
		out.WriteString(clean(strings.TrimSuffix(l, "\n")))
		out.WriteByte('\n')
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func reqTitle(r *Request, from time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nrequest %d", r.Label, r.Timeline)
	if r.Conn != 0 {
		fmt.Fprintf(&b, " on connection #%d", r.Conn)
	}
	fmt.Fprintf(&b, ", %s to %s\n", off(r.Start, from), off(r.End, from))
	for _, st := range r.Stages {
		fmt.Fprintf(&b, "%-9s %s\n", st.Name, ms(st.To.Sub(st.From)))
	}
	fmt.Fprintf(&b, "outcome: %s", r.Outcome)
	if r.Fault != "" {
		fmt.Fprintf(&b, "\nfault: %s", r.Fault)
	}
	if r.RetryOf != 0 {
		fmt.Fprintf(&b, "\n%s of attempt %d", r.Retry, r.RetryOf)
	}
	return cleanLines(b.String())
}

// ticks returns 4 to 10 ticks at a round step across the plot.
func ticks(sc scale) []tick {
	if sc.d <= 0 {
		return []tick{{X: labelW, Label: "0"}}
	}
	step := niceStep(sc.d / 6)
	var out []tick
	for t := time.Duration(0); t <= sc.d && len(out) < 12; t += step {
		out = append(out, tick{X: sc.x(sc.from.Add(t)), Label: durLabel(t)})
	}
	return out
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten nanoseconds.
func niceStep(d time.Duration) time.Duration {
	s := time.Duration(1)
	for range 20 {
		for _, m := range []time.Duration{1, 2, 5} {
			if s*m >= d {
				return s * m
			}
		}
		s *= 10
	}
	return s
}

func durLabel(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%gµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%gms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%gs", d.Seconds())
}

type waterfallV struct {
	Title, Outcome string
	W, H           int
	Axis           []tick
	Rows           []wfRow
	Events         []string
}

type wfRow struct {
	Name     string
	Class    int
	Y, TextY int
	X, W     float64
	Dur      string
}

// waterfallView lays r out as httpstat does, a row per stage, on a time
// axis from its start.
func waterfallView(r *Request, events []Event) *waterfallV {
	sc := scale{from: r.Start, d: r.End.Sub(r.Start)}
	v := &waterfallV{Title: clean(r.Label), Outcome: clean(r.Outcome), W: labelW + plotW + whyW, Axis: ticks(sc)}
	y := axisH
	for _, st := range r.Stages {
		x := sc.x(st.From)
		v.Rows = append(v.Rows, wfRow{Name: st.Name, Class: stageClass(st.Name), Y: y, TextY: y + laneH - 4, X: x,
			W: max(round1(sc.x(st.To)-x), 0.5), Dur: ms(st.To.Sub(st.From))})
		y += laneH
	}
	v.Rows = append(v.Rows, wfRow{Name: "total", Class: len(stageNames), Y: y, TextY: y + laneH - 4, X: labelW,
		W: max(round1(sc.x(r.End)-labelW), 0.5), Dur: ms(r.End.Sub(r.Start))})
	v.H = y + laneH + 4
	for _, e := range events {
		v.Events = append(v.Events, clean(fmt.Sprintf("%10s  %s", ms(e.At), e.Text)))
	}
	return v
}

var page = template.Must(template.New("page").Parse(pageHTML))
