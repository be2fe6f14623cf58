package pool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/vocab"
)

// quietLocked reports whether nothing is in motion: no dial in progress,
// no request between RoundTrip and its response, and every active
// connection held only by open response bodies.
func (p *Pool) quietLocked() bool {
	if p.sumLocked(func(h *counters) int { return h.dialing + h.waiting }) > 0 {
		return false
	}
	for r := range p.reqs.all() {
		if !r.bodyOpen {
			return false
		}
	}
	for _, c := range p.conns {
		if c.State != vocab.StateActive {
			continue
		}
		for id := range c.active.all() {
			if r := p.reqs.get(id); r == nil || !r.bodyOpen {
				return false
			}
		}
	}
	return true
}

// Quiesce waits until the pool is quiet — no dial in progress, no request
// waiting for a connection or for its response, no connection active
// except those held by open response bodies — or ctx ends, whose error it
// then returns.
func (p *Pool) Quiesce(ctx context.Context) error {
	if err := p.usable(ctx); err != nil {
		return err
	}
	if err := notify.Wait(ctx, &p.mu, &p.changes, p.quietLocked); err != nil {
		return fmt.Errorf("pool: did not settle: %s: %w", p.describeMotion(), err)
	}
	return nil
}

func (p *Pool) describeMotion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	if n := p.sumLocked(func(h *counters) int { return h.dialing }); n > 0 {
		parts = append(parts, fmt.Sprintf("%d dial(s) in progress", n))
	}
	if n := p.sumLocked(func(h *counters) int { return h.waiting }); n > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) waiting for a connection", n))
	}
	n := 0
	for r := range p.reqs.all() {
		if !r.bodyOpen && !r.waiting {
			n++
		}
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) awaiting a response", n))
	}
	if len(parts) == 0 {
		parts = append(parts, "connections still active")
	}
	return strings.Join(parts, ", ")
}

// Check waits for the pool to settle (bounded by ctx) and returns one error
// naming every problem, or nil: response bodies still open, with where they
// were opened; connections still active, with the requests holding them;
// more connections open to a host than its cap.
func (p *Pool) Check(ctx context.Context) error {
	if err := p.usable(ctx); err != nil {
		return err
	}
	var errs []error
	if err := p.Quiesce(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, b := range p.OpenBodies() {
		msg := fmt.Sprintf("open body: %s %s (request %d) pins connection #%d, open for %s",
			b.Method, b.URL, b.Timeline, b.Conn, openFor(b.Age))
		if b.Collected {
			msg += " (garbage collected without Close)"
		}
		if b.Stack != "" {
			msg += "; opened at:\n" + indent(b.Stack)
		}
		errs = append(errs, errors.New(msg))
	}
	p.mu.Lock()
	var active []*connState
	for _, c := range p.conns {
		if c.State == vocab.StateActive {
			active = append(active, c)
		}
	}
	sort.Slice(active, func(i, j int) bool { return active[i].ID < active[j].ID })
	for _, c := range active {
		var holders []string
		for id := range c.active.all() {
			if r := p.reqs.get(id); r != nil {
				state := "in flight"
				if r.bodyOpen {
					state = "body open"
				}
				holders = append(holders, fmt.Sprintf("%s %s (request %d, %s)", r.method, redactedURL(r), id, state))
			} else {
				holders = append(holders, fmt.Sprintf("request %d", id))
			}
		}
		sort.Strings(holders)
		errs = append(errs, fmt.Errorf("active connection #%d to %s held by %s", c.ID, c.Host, strings.Join(holders, ", ")))
	}
	if p.maxConn > 0 {
		hosts := make([]string, 0, len(p.hosts))
		for k := range p.hosts {
			hosts = append(hosts, k)
		}
		sort.Strings(hosts)
		for _, k := range hosts {
			if h := p.hosts[k]; h.open-h.doomed > p.maxConn {
				errs = append(errs, fmt.Errorf("%d connections open to %s, cap %d", h.open-h.doomed, k, p.maxConn))
			}
		}
	}
	if err := p.totalsLocked().Check(); err != nil {
		errs = append(errs, err)
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}

// openFor says how long a body has been open, never "0s": to the
// millisecond from a millisecond, to the microsecond below (a check at the
// end of a test finds a body a few hundred microseconds old).
func openFor(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Microsecond:
		return d.Round(time.Microsecond).String()
	}
	return "under 1µs"
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
