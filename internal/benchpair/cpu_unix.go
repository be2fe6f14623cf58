//go:build unix

package benchpair

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user and system) this process has used:
// a benchmark divides its growth by b.N for cpu-ns/op, which other load on
// the machine disturbs less than wall time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
