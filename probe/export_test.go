package probe

import "time"

// SettleBound sets how long the probe waits for a phase's connections to
// close while the run's context lives (3s otherwise). A test makes it
// long, so that a wait that ignored the end of the run's context would
// hang rather than last a few seconds more.
func SettleBound(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.settleBound = d
		return nil
	})
}
