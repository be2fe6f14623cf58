package testserver

import (
	"context"
	"sync"

	"github.com/connaudit/connaudit/internal/notify"
)

// Counter is a count that a test can wait on without sleeping: a server
// accepts a connection a moment after the client's connect returned, so a
// test waits for the count it expects instead of reading it once. The zero
// value is ready to use.
type Counter struct {
	mu      sync.Mutex
	n       int64
	changes notify.Changes
}

// Add adds d to the count.
func (c *Counter) Add(d int64) {
	c.mu.Lock()
	c.n += d
	c.changes.Signal()
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
	return notify.Wait(ctx, &c.mu, &c.changes, func() bool { return c.n >= n })
}
