package pool

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
)

// OpenBody describes a response body handed out and not yet closed.
type OpenBody struct {
	// Timeline is the id of the request's timeline.
	Timeline uint64 `json:"timeline"`
	Method   string `json:"method"`
	// URL is redacted.
	URL string `json:"url"`
	// Conn is the id of the connection the body pins (HTTP/1) or shares
	// (HTTP/2).
	Conn uint64 `json:"conn"`
	// Age is how long ago the response was handed out.
	Age time.Duration `json:"age_ns"`
	// Stack is where the request was made, with [CaptureStacks].
	Stack string `json:"stack,omitempty"`
	// Collected is set when the body was garbage collected without Close.
	// The connection it pinned stays pinned.
	Collected bool `json:"collected,omitempty"`
}

// UnclosedBodyReport is passed to the [UnclosedBodyReports] callback once
// per call site whose response body was garbage collected without Close.
type UnclosedBodyReport struct {
	OpenBody
	// Site is the first frame of the caller outside net/http and this
	// module, "" without [CaptureStacks].
	Site string
}

// OpenBodies returns the response bodies not yet closed, oldest first.
func (p *Pool) OpenBodies() []OpenBody {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.openBodiesLocked(now)
}

// openBodiesLocked returns the bodies not yet closed at now; p.mu is held.
func (p *Pool) openBodiesLocked(now time.Time) []OpenBody {
	var out []OpenBody
	for r := range p.reqs.all() {
		if r.bodyOpen {
			out = append(out, r.openBody(now))
		}
	}
	slices.SortFunc(out, func(a, b OpenBody) int { return cmp.Compare(a.Timeline, b.Timeline) })
	return out
}

func (r *request) openBody(now time.Time) OpenBody {
	b := OpenBody{Timeline: r.id, Method: r.method, URL: httptrace.RedactURL(&r.u), Age: now.Sub(r.openedAt.time()),
		Stack: formatStack(r.stack), Collected: r.collected}
	if r.conn != nil {
		b.Conn = r.conn.ID
	}
	return b
}

// bodyCollected is the httptrace report of a body collected unclosed.
func (p *Pool) bodyCollected(u httptrace.UnclosedBody) {
	p.mu.Lock()
	r := p.reqs.get(u.Timeline)
	var rep UnclosedBodyReport
	if r != nil {
		r.collected = true
		rep.OpenBody = r.openBody(time.Now())
		rep.Site = callSite(r.stack)
	} else {
		rep.OpenBody = OpenBody{Timeline: u.Timeline, Method: u.Method, URL: u.URL, Conn: u.Conn, Collected: true}
	}
	key := rep.Site
	if key == "" {
		key = "unknown"
	}
	first := !p.unclosed[key]
	p.unclosed[key] = true
	report := p.cfg.unclosedReport
	p.mu.Unlock()
	if first && report != nil {
		report(rep)
	}
}

// ignoredFrame reports whether a frame belongs to the machinery between the
// caller and the wire.
func ignoredFrame(fn string) bool {
	for _, pre := range []string{"net/http.", "github.com/connaudit/connaudit/httptrace.", "github.com/connaudit/connaudit/pool.", "runtime."} {
		if strings.HasPrefix(fn, pre) {
			return true
		}
	}
	return false
}

func callSite(pcs []uintptr) string {
	if len(pcs) == 0 {
		return ""
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !ignoredFrame(f.Function) {
			return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

func formatStack(pcs []uintptr) string {
	if len(pcs) == 0 {
		return ""
	}
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !ignoredFrame(f.Function) {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

func sortConns(cs []Conn) {
	slices.SortFunc(cs, func(a, b Conn) int { return cmp.Compare(a.ID, b.ID) })
}

func sortIDs(ids []uint64) { slices.Sort(ids) }
