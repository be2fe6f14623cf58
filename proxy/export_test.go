package proxy

import (
	"context"

	"github.com/connaudit/connaudit/internal/notify"
)

// WaitFor waits until cond, given the connections open and the requests
// finished, holds, or ctx ends.
func WaitFor(ctx context.Context, p *Proxy, cond func(open int, finished int64) bool) error {
	return notify.Wait(ctx, &p.mu, &p.changes, func() bool { return cond(len(p.conns), p.finished.Load()) })
}
