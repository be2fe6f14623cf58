package proxy

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
)

// An Attempt is one request as the proxy saw it.
type Attempt struct {
	ID     uint64 `json:"id"`
	Client string `json:"client"`
	Conn   uint64 `json:"conn"` // the downstream connection
	Nth    int    `json:"nth"`  // its index on that connection, from 1
	Method string `json:"method"`
	Path   string `json:"path"` // query values redacted
	// Digest is the first 16 hex digits of the SHA-256 of the body read
	// (empty: no body): of the whole body for a method that is not
	// idempotent, else of its first 64 KiB, followed by "/LENGTH" when it
	// was longer; "+" at the end: the body was not read to its end.
	Digest         string        `json:"digest,omitempty"`
	IdempotencyKey bool          `json:"idempotency_key,omitempty"` // it had one (never output)
	Start          time.Time     `json:"start"`
	Idle           time.Duration `json:"idle_ns"` // its connection idle before it
	Fault          string        `json:"fault,omitempty"`
	// Outcome: "response" (a status written to the client), "fault" (a
	// fault dropped its connection), "client-gone" (the client ended it),
	// "unbounded" (held past the guard, cut), "upstream-error".
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"` // the status the client got
	// Upstream: "response" (the upstream answered: the request was
	// processed), "error" (the upstream round trip failed), "not-sent".
	Upstream       string    `json:"upstream"`
	UpstreamStatus int       `json:"upstream_status,omitempty"`
	Error          string    `json:"error,omitempty"`
	End            time.Time `json:"end"`
}

// The outcomes of an attempt.
const (
	outcomeStatus        = "response"
	outcomeFault         = "fault"
	outcomeClientGone    = "client-gone"
	outcomeUnbounded     = "unbounded"
	outcomeUpstreamError = "upstream-error"

	upstreamResponse = "response"
	upstreamError    = "error"
	upstreamNotSent  = "not-sent"
)

// committed says whether the upstream processed the request (or may
// have: its round trip failed once sent).
func (a Attempt) committed() bool {
	return a.Upstream == upstreamResponse || a.Upstream == upstreamError
}

// failed says whether the client got no response to it.
func (a Attempt) failed() bool { return a.Outcome != outcomeStatus }

// maxKept bounds what is kept of each client for the report: connections
// and notable attempts beyond it are counted, not listed.
const maxKept = 256

// maxAnswered bounds the errors told apart in a client's answers from the
// proxy: past it, "(other errors)".
const maxAnswered = 16

// clientRec is what the proxy keeps of one client; guarded by Proxy.mu.
type clientRec struct {
	name     string
	conns    []Conn // closed, the first maxKept
	nConns   int
	requests int
	reused   int
	maxIdle  time.Duration
	reqIdle  time.Duration // the longest idle gap a request followed
	closes   map[string]int
	faults   int // of its closed connections: request and connection rules'
	statuses map[int]int
	recent   map[replayKey][]*Attempt // within the window
	queue    []recentEntry
	retries  int            // requests sent again after a 5xx
	answered map[string]int // the proxy's answers in place of the upstream's: "502 error" → requests
}

type recentEntry struct {
	key replayKey
	a   *Attempt
}

// replayKey is what makes two requests the same request.
type replayKey struct{ method, path, digest, idempotencyKey string }

// clientName is the client a request is from: the header named by
// ClientHeader, else the source IP.
func (p *Proxy) clientName(req *http.Request, r *connRec) string {
	if h := p.cfg.clientHeader; h != "" {
		if v := req.Header.Get(h); v != "" {
			if redact.SecretHeader(h) {
				return redact.Masked
			}
			return text.Cut(redact.Text(redact.Printable(v)), 40)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != "" {
		return r.client
	}
	host, _, err := net.SplitHostPort(r.remote)
	if err != nil {
		return r.remote
	}
	return host
}

// clientLocked returns the client's record, made if new.
func (p *Proxy) clientLocked(name string) *clientRec {
	c := p.clients[name]
	if c == nil {
		c = &clientRec{name: name, closes: map[string]int{}, statuses: map[int]int{}, recent: map[replayKey][]*Attempt{},
			answered: map[string]int{}}
		p.clients[name] = c
		p.order = append(p.order, name)
	}
	return c
}

// addConn takes the connection, closed, from the open ones and accounts
// for it, in one step: no reader sees it in neither.
func (p *Proxy) addConn(r *connRec) {
	c := r.snapshot()
	name := c.Client
	if name == "" {
		name = c.Remote
		if host, _, err := net.SplitHostPort(name); err == nil {
			name = host
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, r.id)
	cr := p.clientLocked(name)
	cr.nConns++
	if len(cr.conns) < maxKept {
		cr.conns = append(cr.conns, c)
	}
	cr.closes[c.ClosedBy+": "+c.Reason]++
	cr.faults += len(c.Faults)
	cr.maxIdle = max(cr.maxIdle, c.MaxIdle)
	cr.reqIdle = max(cr.reqIdle, c.reqIdle)
}

// finish accounts for an attempt and links it to the one it repeats.
func (p *Proxy) finish(client string, x *exchange) {
	a := x.a
	a.End = time.Now()
	if a.Status == 0 {
		a.Status = x.w.status
	}
	a.Digest = x.body.digest()
	key := replayKey{x.method, a.Path, a.Digest, x.key}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.clientLocked(client)
	c.requests++
	if a.Nth > 1 {
		c.reused++
	}
	if a.Status > 0 {
		c.statuses[a.Status]++
	}
	if x.answered {
		k := fmt.Sprintf("%d %s", a.Status, a.Error)
		if _, ok := c.answered[k]; !ok && len(c.answered) >= maxAnswered {
			k = fmt.Sprintf("%d (other errors)", a.Status)
		}
		c.answered[k]++
	}
	if a.Outcome == outcomeUnbounded && len(p.cut) < maxKept {
		p.cut = append(p.cut, a)
	}
	// Forget what is past the window.
	cutoff := a.Start.Add(-p.cfg.window)
	drop := 0
	for drop < len(c.queue) && c.queue[drop].a.Start.Before(cutoff) {
		e := c.queue[drop]
		l := c.recent[e.key]
		if i := slices.Index(l, e.a); i >= 0 {
			l = slices.Delete(l, i, i+1)
		}
		if len(l) == 0 {
			delete(c.recent, e.key)
		} else {
			c.recent[e.key] = l
		}
		drop++
	}
	c.queue = c.queue[drop:]
	// The same request's attempts, in the order they started: one whose
	// end is accounted for after a later one's (a reset request's handler
	// returning after the client's retry was served) goes between the two,
	// and the pair it splits is judged as the two pairs it makes.
	prev := c.recent[key]
	i, _ := slices.BinarySearchFunc(prev, a.Start, func(x *Attempt, t time.Time) int { return x.Start.Compare(t) })
	if i > 0 && i < len(prev) {
		p.unlink(c, prev[i-1], prev[i])
	}
	if i > 0 {
		p.link(c, prev[i-1], &a)
	}
	if i < len(prev) {
		p.link(c, &a, prev[i])
	}
	c.recent[key] = slices.Insert(prev, i, &a)
	c.queue = append(c.queue, recentEntry{key: key, a: &a})
	p.finished.Add(1)
	p.version.Add(1)
	p.changes.Signal()
}

// link judges a request seen again: first is the earlier of the two.
func (p *Proxy) link(c *clientRec, x, y *Attempt) {
	first, again := x, y
	if y.Start.Before(x.Start) {
		first, again = y, x
	}
	if !first.failed() {
		if first.Status >= 500 {
			c.retries++
		}
		return
	}
	class := classHiddenRetry
	if first.committed() && again.committed() && !idempotent(first.Method) && !first.IdempotencyKey {
		class = classWriteTwice
	}
	if len(p.replays) < maxKept*4 {
		p.replays = append(p.replays, Replay{Client: c.name, Class: class, First: *first, Again: *again})
	}
}

// unlink takes back what link judged of x and y, the earlier first: a pair
// that an attempt accounted for late turned out to stand between.
func (p *Proxy) unlink(c *clientRec, x, y *Attempt) {
	if !x.failed() {
		if x.Status >= 500 {
			c.retries--
		}
		return
	}
	for i := len(p.replays) - 1; i >= 0; i-- {
		if r := p.replays[i]; r.First.ID == x.ID && r.Again.ID == y.ID {
			p.replays = slices.Delete(p.replays, i, i+1)
			return
		}
	}
}

// idempotent says whether a method is idempotent (RFC 9110 9.2.2).
func idempotent(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
