package probe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/stretchr/testify/require"
)

// exactRank returns the nearest-rank p-th percentile of sorted ds.
func exactRank(ds []time.Duration, p int) time.Duration {
	i := (p*len(ds) + 99) / 100
	return ds[max(0, i-1)]
}

// TestHistogramWithinOnePercent: every percentile the histogram gives is
// within 1 % of the exact one, from nanoseconds to hours, and its maximum
// is exact.
func TestHistogramWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []time.Duration{100, 10 * time.Microsecond, time.Millisecond, time.Second, 3 * time.Hour} {
		var h histogram
		ds := make([]time.Duration, 0, 5000)
		for range cap(ds) {
			// Log-uniform: every decade up to spread.
			d := time.Duration(float64(spread) * r.Float64() * r.Float64() * r.Float64())
			ds = append(ds, d)
			h.add(d)
		}
		slices.Sort(ds)
		for _, p := range []int{1, 50, 90, 99, 100} {
			want, got := exactRank(ds, p), h.percentile(p)
			diff := got - want
			if diff < 0 {
				diff = -diff
			}
			require.LessOrEqual(t, float64(diff), float64(want)/100+0.5, "spread %v p%d: want %v got %v", spread, p, want, got)
		}
		require.Equal(t, ds[len(ds)-1], h.percentiles().Max)
	}
	var empty histogram
	require.Equal(t, Percentiles{}, empty.percentiles())
}

// TestHistogramFixedSize: the histogram's memory is the same after a
// million durations as after one.
func TestHistogramFixedSize(t *testing.T) {
	var h histogram
	h.add(time.Millisecond)
	counts := h.counts
	for i := range 1_000_000 {
		h.add(time.Duration(i) * time.Microsecond)
	}
	require.Same(t, counts, h.counts)
	require.EqualValues(t, 1_000_001, h.n)
}

// TestTalliesBounded: the connections tallied one by one stay under the
// bound however many there are, and the summary still covers them all.
func TestTalliesBounded(t *testing.T) {
	a := newAggregator(t.Context(), false, time.Second, defaultMaxBody)
	const conns = 5 * maxTallies
	answered := 0
	for id := uint64(1); id <= conns; id++ {
		answered += 1 + int(id%3)
		for range 1 + int(id%3) { // 1 to 3 responses each
			tl := &httptrace.Timeline{ID: id, Status: 200, Finished: true}
			tl.Conn.ID = id
			a.Observe(tl)
		}
		require.LessOrEqual(t, len(a.ev.conns), maxTallies)
	}
	s := a.ev.perConn()
	require.Equal(t, conns, s.conns)
	require.Equal(t, 1, s.min)
	require.Equal(t, 3, s.max)
	require.Equal(t, answered, s.answered)
}

func TestParseKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		in      string
		timeout time.Duration
		max     int
	}{
		{"timeout=5, max=100", 5 * time.Second, 100},
		{"max=3,timeout=1", time.Second, 3},
		{` Timeout = "2" ; max=x`, 0, 0},
		{`timeout="2"`, 2 * time.Second, 0},
		{"timeout=-1, max=-4", 0, 0},
		{"timeout=99999999999999999999", 0, 0},
		{"", 0, 0},
		{"garbage", 0, 0},
	} {
		timeout, maxReqs := parseKeepAlive(tc.in)
		require.Equal(t, tc.timeout, timeout, "%q", tc.in)
		require.Equal(t, tc.max, maxReqs, "%q", tc.in)
	}
	require.Len(t, quoteHeader(strings.Repeat("a", 500)), maxKeepAliveHeader+len("…"))
	require.Equal(t, `timeout=1\x1b[31m`, quoteHeader("timeout=1\x1b[31m"), "escaped")
}
