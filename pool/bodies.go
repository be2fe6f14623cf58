package pool

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/redact"
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
	// OpenedAt is when the response was handed out; Age how long ago.
	OpenedAt time.Time     `json:"opened_at"`
	Age      time.Duration `json:"age_ns"`
	// Stack is where the request was made, with [CaptureStacks]: one
	// "function\n\tfile:line\n" per frame, innermost first.
	Stack string `json:"stack,omitempty"`
	// Collected is set when the body was garbage collected without Close.
	// The connection it pinned stays pinned.
	Collected bool `json:"collected,omitempty"`
}

// Site returns the first frame of b.Stack, "function (file:line)", or ""
// without a stack.
func (b OpenBody) Site() string {
	fn, rest, ok := strings.Cut(b.Stack, "\n\t")
	if !ok {
		return ""
	}
	loc, _, _ := strings.Cut(rest, "\n")
	return fn + " (" + loc + ")"
}

// OpenBodies returns the response bodies not yet closed, oldest first.
func (p *Pool) OpenBodies() []OpenBody {
	if p == nil {
		return nil
	}
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
	opened := r.openedAt.time()
	b := OpenBody{Timeline: r.id, Method: r.method, URL: redact.URL(r.u), OpenedAt: opened, Age: now.Sub(opened),
		Stack: hook.FormatStack(r.stack), Collected: r.collected}
	if r.conn != nil {
		b.Conn = r.conn.ID
	}
	return b
}

func sortConns(cs []Conn) {
	slices.SortFunc(cs, func(a, b Conn) int { return cmp.Compare(a.ID, b.ID) })
}

func sortIDs(ids []uint64) { slices.Sort(ids) }
