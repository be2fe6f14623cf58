// Package notify wakes the goroutines that wait for a change of some state
// guarded by a mutex: the tracer's Collector, the pool and the test servers
// each have such state. It is not API.
package notify

import (
	"context"
	"sync"
)

// Changes broadcasts changes of a state guarded by the caller's mutex,
// which is held for each of its methods. Its zero value is ready to use; it
// allocates only while someone waits.
type Changes struct {
	ch chan struct{} // closed at the next change; nil when nobody waits
}

// Signal wakes every waiter: the state changed.
func (c *Changes) Signal() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Next returns a channel closed at the next Signal.
func (c *Changes) Next() <-chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Wait waits until cond, called with mu held, returns true, or ctx ends. It
// returns ctx's error in the latter case. mu guards c.
func Wait(ctx context.Context, mu *sync.Mutex, c *Changes, cond func() bool) error {
	for {
		mu.Lock()
		if cond() {
			mu.Unlock()
			return nil
		}
		ch := c.Next()
		mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
