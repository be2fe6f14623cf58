package probe

import (
	"math/bits"
	"time"
)

// A histogram counts durations in log-linear buckets, as HdrHistogram
// does: exact below histSub nanoseconds, then histSub buckets of equal
// width per power of two. A bucket is then at most 1/histSub of its values
// wide, and its midpoint within 1/(2·histSub) of any of them: with 64,
// percentiles within 0.8 %. Its size is fixed (histBuckets counters),
// whatever the number of durations.
type histogram struct {
	counts   *[histBuckets]uint64 // allocated on the first add
	n        uint64
	min, max time.Duration
}

const (
	histSub = 64
	// histMaxBits bounds the durations told apart: up to 2^45 ns (about 9.8
	// hours); longer ones count in the last bucket (the maximum stays
	// exact).
	histMaxBits = 45
	histBuckets = histSub * (histMaxBits - 5)
)

// histIndex returns the bucket of v ≥ 0.
func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 7 // v>>e is in [64, 128)
	i := histSub*e + int(v>>uint(e))
	return min(i, histBuckets-1)
}

// histValue returns the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	e := i/histSub - 1
	m := uint64(i%histSub + histSub)
	return m<<uint(e) + (uint64(1)<<uint(e))/2
}

func (h *histogram) add(d time.Duration) {
	d = max(d, 0)
	if h.counts == nil {
		h.counts = new([histBuckets]uint64)
	}
	h.counts[histIndex(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100), the
// midpoint of its bucket kept within the smallest and largest durations.
func (h *histogram) percentile(p int) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := (uint64(p)*h.n + 99) / 100 // ceil(p/100 · n)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(histValue(i))
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

func (h *histogram) percentiles() Percentiles {
	if h.n == 0 {
		return Percentiles{}
	}
	return Percentiles{P50: h.percentile(50), P90: h.percentile(90), P99: h.percentile(99), Max: h.max}
}
