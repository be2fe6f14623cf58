//go:build !unix

package benchpair

import "time"

// ProcessCPU returns 0: CPU time is read on Unix systems only.
func ProcessCPU() time.Duration { return 0 }
