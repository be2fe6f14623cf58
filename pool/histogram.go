package pool

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// durationBuckets are the upper bounds of a Histogram's buckets: from
// 25µs, below which a wait or a dial on loopback hardly falls, to 10s, the
// OpenTelemetry conventions' last bound, in steps of 1, 2.5 and 5 per
// decade as theirs. A wait for an idle connection handed over on loopback
// takes tens to hundreds of microseconds, a dial on loopback about as
// much, one in a data centre a millisecond or less, one across a region
// tens of milliseconds, a TLS handshake one or two round trips more: each
// of these falls in a bucket of its own, where the conventions' first
// bound (5ms) would put them all in one.
var durationBuckets = [...]time.Duration{
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// DurationBuckets returns the upper bounds, inclusive, of the buckets in
// which a [Histogram] counts durations, in increasing order: 25µs, 50µs,
// 100µs, 250µs, 500µs, 1ms, 2.5ms and so on in steps of 1, 2.5 and 5 up to
// 10s. A duration above the last falls in one more bucket, unbounded.
// Exporters use them as their histograms' boundaries, so that the pool's
// numbers and theirs fall in the same buckets.
func DurationBuckets() []time.Duration { return slices.Clone(durationBuckets[:]) }

// Histogram counts durations by bucket, in the buckets of
// [DurationBuckets].
type Histogram struct {
	// Count is the number of durations counted; Sum their total.
	Count int64         `json:"count"`
	Sum   time.Duration `json:"sum_ns"`
	// Buckets[i] counts the durations of at most DurationBuckets()[i] and
	// more than the bound before it; its last entry, one past the last
	// bound, those above 10s. Not cumulative; nil when Count is 0. In JSON
	// each bucket names its bound: {"le_ns": 25000, "count": 3}, the last
	// with "le_ns": null.
	Buckets []int64 `json:"buckets,omitempty"`
}

// histogramJSON is a Histogram as JSON writes it: each bucket with its
// upper bound.
type histogramJSON struct {
	Count   int64         `json:"count"`
	Sum     time.Duration `json:"sum_ns"`
	Buckets []bucketJSON  `json:"buckets,omitempty"`
}

// bucketJSON is one bucket: the durations counted, of at most LE (in
// nanoseconds; nil for the last bucket, which has no bound).
type bucketJSON struct {
	LE    *time.Duration `json:"le_ns"`
	Count int64          `json:"count"`
}

// MarshalJSON writes h with each bucket's bound beside its count.
func (h Histogram) MarshalJSON() ([]byte, error) {
	out := histogramJSON{Count: h.Count, Sum: h.Sum}
	for i, n := range h.Buckets {
		b := bucketJSON{Count: n}
		if i < len(durationBuckets) {
			le := durationBuckets[i]
			b.LE = &le
		}
		out.Buckets = append(out.Buckets, b)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes. Buckets whose bounds are
// not the pool's ([DurationBuckets]) are an error.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var in histogramJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*h = Histogram{Count: in.Count, Sum: in.Sum}
	for i, bk := range in.Buckets {
		last := i == len(durationBuckets)
		if i > len(durationBuckets) || last != (bk.LE == nil) || (!last && *bk.LE != durationBuckets[i]) {
			return fmt.Errorf("pool: histogram bucket %d: its bound is not the pool's", i)
		}
		h.Buckets = append(h.Buckets, bk.Count)
	}
	return nil
}

// histogram is a Histogram as the pool's counters keep it, with no
// allocation.
type histogram struct {
	count   int64
	sum     time.Duration
	buckets [len(durationBuckets) + 1]int64
}

// add counts d.
func (h *histogram) add(d time.Duration) {
	i, _ := slices.BinarySearch(durationBuckets[:], d)
	h.buckets[i]++
	h.count++
	h.sum += d
}

func (h *histogram) export() Histogram {
	out := Histogram{Count: h.count, Sum: h.sum}
	if h.count > 0 {
		out.Buckets = slices.Clone(h.buckets[:])
	}
	return out
}

// add adds the counts of o to h, bucket by bucket.
func (h *Histogram) add(o Histogram) {
	h.Count += o.Count
	h.Sum += o.Sum
	if len(o.Buckets) > 0 && h.Buckets == nil {
		h.Buckets = make([]int64, len(o.Buckets))
	}
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
}

// check returns false unless the buckets add up to Count.
func (h Histogram) check() bool {
	var n int64
	for _, b := range h.Buckets {
		if b < 0 {
			return false
		}
		n += b
	}
	return n == h.Count && h.Sum >= 0 && (h.Count == 0 || len(h.Buckets) == len(durationBuckets)+1)
}
