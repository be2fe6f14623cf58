package benchpair_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestRunAlternates checks that both clients send b.N requests, in batches
// that alternate ABBA, and that the metrics are reported under the names.
func TestRunAlternates(t *testing.T) {
	var (
		calls, sent [2]int
		bad         []string
		n           int
	)
	client := func(i int) func(int) error {
		return func(k int) error {
			// Batches come in pairs: 0 1, then 1 0, then 0 1, ...
			call := calls[0] + calls[1]
			pair := call / 2
			want := pair % 2
			if call%2 == 1 {
				want = 1 - want
			}
			if i != want || k < 1 || k > benchpair.Batch {
				bad = append(bad, fmt.Sprintf("call %d: client %d with %d requests", call, i, k))
			}
			calls[i]++
			sent[i] += k
			return nil
		}
	}
	res := testing.Benchmark(func(b *testing.B) {
		calls, sent, bad, n = [2]int{}, [2]int{}, nil, b.N
		benchpair.Run(b, [2]string{"a", "b"}, [2]func(int) error{client(0), client(1)})
	})
	require.Empty(t, bad)
	require.Equal(t, [2]int{n, n}, sent, "each client sends b.N requests")
	batches := (n + benchpair.Batch - 1) / benchpair.Batch
	require.Equal(t, [2]int{batches, batches}, calls)
	for _, m := range []string{"a-ns/req", "b-ns/req", "a-cpu-ns/req", "b-cpu-ns/req", "overhead-%", "cpu-overhead-%"} {
		require.Contains(t, res.Extra, m)
	}
	require.Positive(t, res.Extra["a-ns/req"])
}

// TestRunFails checks that a client's error fails the benchmark and stops
// it.
func TestRunFails(t *testing.T) {
	calls := 0
	fail := func(int) error { calls++; return errors.New("refused") }
	ok := func(int) error { calls++; return nil }
	res := testing.Benchmark(func(b *testing.B) {
		benchpair.Run(b, [2]string{"a", "b"}, [2]func(int) error{ok, fail})
	})
	require.Zero(t, res.N, "a failed benchmark reports no result")
	require.Equal(t, 2, calls, "the benchmark stops at the first error")
}
