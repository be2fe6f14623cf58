package pool

import (
	"context"
	"errors"
	"fmt"
)

// WaitFor blocks until cond, called with the pool's totals now and after
// each change of the pool's state, returns true, or ctx ends. It returns nil
// in the former case, and ctx's error with the last totals seen in the
// latter. cond runs without the pool's lock held; it must not block.
func (p *Pool) WaitFor(ctx context.Context, cond func(Stats) bool) error {
	if err := p.usable(ctx); err != nil {
		return err
	}
	if cond == nil {
		return errors.New("pool: WaitFor: nil condition")
	}
	for {
		p.mu.Lock()
		s := p.totalsLocked()
		ch := p.changes.Next()
		p.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pool: condition not met (last stats %+v): %w", s, ctx.Err())
		}
	}
}
