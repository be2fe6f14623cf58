package testserver

import (
	"context"
	"sync"
)

// Counter is a count that a test can wait on without sleeping: a server
// accepts a connection a moment after the client's connect returned, so a
// test waits for the count it expects instead of reading it once. The zero
// value is ready to use.
type Counter struct {
	mu      sync.Mutex
	n       int64
	changed chan struct{} // closed at the next change; nil when nobody waits
}

// Add adds d to the count.
func (c *Counter) Add(d int64) {
	c.mu.Lock()
	c.n += d
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	c.mu.Unlock()
}

// Load returns the count.
func (c *Counter) Load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// WaitAtLeast waits until the count is at least n, or ctx ends; it
// returns ctx's error in the latter case.
func (c *Counter) WaitAtLeast(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		if c.n >= n {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
