// Package benchpair measures two HTTP clients side by side in one
// benchmark, for the module's benchmarks and those of the bench module. It
// is not API.
package benchpair

import (
	"testing"
	"time"
)

// Batch is the number of requests Run sends through one client before it
// switches to the other: a few milliseconds on loopback, shorter than the
// drifts of a shared machine.
const Batch = 50

// Run sends b.N requests through each of two clients, in batches of
// [Batch] that alternate between them in the order ABBA (0 1, 1 0, 0 1, …)
// so that neither is always first. clients[i](n) sends n requests through
// client i and returns the first error, which fails the benchmark. Load
// from elsewhere on the machine, which shifts separate runs by 10 % or
// more, falls on both clients alike.
//
// Run reports each client's wall and CPU time per request, as
// "NAME-ns/req" and "NAME-cpu-ns/req" with the names given, and the
// second client's overhead over the first in percent, as "overhead-%" and
// "cpu-overhead-%". An op is one request through each client.
func Run(b *testing.B, names [2]string, clients [2]func(n int) error) {
	RunBatches(b, names, clients, Batch)
}

// RunBatches is [Run] with batches of size requests: many goroutines
// sharing a client need a batch well above their number to keep them all
// busy.
func RunBatches(b *testing.B, names [2]string, clients [2]func(n int) error, size int) {
	var wall, cpu [2]time.Duration
	batch := func(i, n int) {
		w, c := time.Now(), ProcessCPU()
		if err := clients[i](n); err != nil {
			b.Fatalf("%s: %v", names[i], err)
		}
		wall[i] += time.Since(w)
		cpu[i] += ProcessCPU() - c
	}
	b.ResetTimer()
	for done, k := 0, 0; done < b.N; k++ {
		n := min(size, b.N-done)
		first := k % 2
		batch(first, n)
		batch(1-first, n)
		done += n
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) }
	for i, name := range names {
		b.ReportMetric(per(wall[i]), name+"-ns/req")
		b.ReportMetric(per(cpu[i]), name+"-cpu-ns/req")
	}
	b.ReportMetric(percent(wall), "overhead-%")
	b.ReportMetric(percent(cpu), "cpu-overhead-%")
}

// percent returns how much more d[1] is than d[0], in percent; 0 when
// d[0] is 0 (CPU time where it cannot be read).
func percent(d [2]time.Duration) float64 {
	if d[0] <= 0 {
		return 0
	}
	return 100 * (float64(d[1])/float64(d[0]) - 1)
}
