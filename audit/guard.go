package audit

import (
	"errors"
	"time"
)

var errGuard = errors.New("audit: guard deadline: no client bound fired")

func (r *Runner) guardFor(s Scenario, sub subject) time.Duration {
	if r.guard > 0 {
		return r.guard
	}
	// Three times the scenario's own wait: a loaded machine's timers
	// fire late, and a trickle of 24 waits must not meet the guard.
	g := max(2*time.Second, 3*s.Wait+time.Second)
	if _, own := sub.stageBound(s.Expect.Stage); own > 0 && own <= maxOwnGuard {
		g = max(g, own+time.Second)
	}
	return g
}
