package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpenForNeverZero: a body open for less than half a millisecond, as
// one a check at the end of a test finds, is not "open for 0s".
func TestOpenForNeverZero(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                 "under 1µs",
		400 * time.Nanosecond:             "under 1µs",
		312*time.Microsecond + 400:        "312µs",
		499 * time.Microsecond:            "499µs",
		1500 * time.Microsecond:           "2ms",
		61*time.Second + time.Millisecond: "1m1.001s",
	} {
		require.Equal(t, want, openFor(d), "%v", time.Duration(d))
	}
}
