package proxy

import (
	"context"

	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/pool"
)

// Counts are what WaitFor's condition is given.
type Counts struct {
	Open     int   // connections open
	Finished int64 // requests finished
	Faults   int64 // faults injected
}

// WaitFor waits until cond holds, or ctx ends.
func WaitFor(ctx context.Context, p *Proxy, cond func(Counts) bool) error {
	return notify.Wait(ctx, &p.mu, &p.changes, func() bool {
		return cond(Counts{Open: len(p.conns), Finished: p.finished.Load(), Faults: p.faults.Load()})
	})
}

// WaitUpstream waits until cond holds of the upstream pool's Stats, or ctx
// ends.
func WaitUpstream(ctx context.Context, p *Proxy, cond func(pool.Stats) bool) error {
	return p.up.WaitFor(ctx, cond)
}

// Attempts returns the client's attempts still within the replay window,
// in the order they finished.
func Attempts(p *Proxy, client string) []Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.clients[client]
	if c == nil {
		return nil
	}
	out := make([]Attempt, 0, len(c.queue))
	for _, e := range c.queue {
		out = append(out, *e.a)
	}
	return out
}
