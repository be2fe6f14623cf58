package serve

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The ranges of the numbers a kit sends (docs/serve.md): a number out of
// its range is refused with a 400 that says the range, before it is
// printed or turned into a time.Duration (which a huge one overflows).
const (
	// maxElapsedMS bounds a call's elapsed_ms: an hour, far beyond any
	// guard of the server's (tens of seconds), far below what prints
	// without an exponent.
	maxElapsedMS = float64(time.Hour / time.Millisecond)
	// maxAttempts bounds a report's attempts.
	maxAttempts = 1000
)

// checkMS returns a 400 unless v, the value of the field name, is a time
// in milliseconds in 0..maxElapsedMS.
func checkMS(name string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > maxElapsedMS {
		return badRequest("%s %s is not a time in 0..%.0f ms", name, number(v), maxElapsedMS)
	}
	return nil
}

// waitMS returns the wait a query's timeout_ms asks for: in (0, max].
func waitMS(q string, max time.Duration) (time.Duration, error) {
	v, err := strconv.ParseFloat(q, 64)
	limit := float64(max / time.Millisecond)
	if err != nil || math.IsNaN(v) || v <= 0 || v > limit {
		return 0, badRequest("timeout_ms %q is not a number of ms in (0, %.0f]", printable(q), limit)
	}
	return time.Duration(v * float64(time.Millisecond)), nil
}

// number prints a kit's number short: a huge one with an exponent.
func number(v float64) string {
	return fmt.Sprintf("%.6g", v)
}
