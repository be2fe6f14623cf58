package pool

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestActiveSet checks the set of requests a connection serves: one id
// without a map (HTTP/1), more in the map (HTTP/2), and the first id's
// place taken by another when it leaves.
func TestActiveSet(t *testing.T) {
	var s activeSet
	ids := func() []uint64 { return slices.Sorted(s.all()) }
	require.Zero(t, s.len())
	require.False(t, s.has(0), "0 is no id")
	require.Empty(t, ids())

	s.add(7)
	s.add(7)
	require.Equal(t, 1, s.len())
	require.True(t, s.has(7))
	require.Nil(t, s.more, "one request needs no map")

	s.add(8)
	s.add(9)
	require.Equal(t, 3, s.len())
	require.Equal(t, []uint64{7, 8, 9}, ids())

	s.remove(7) // the first leaves: another takes its place
	require.Equal(t, 2, s.len())
	require.False(t, s.has(7))
	require.NotZero(t, s.one)
	require.Equal(t, []uint64{8, 9}, ids())

	s.remove(42) // not there: nothing changes
	require.Equal(t, []uint64{8, 9}, ids())

	s.remove(9)
	s.remove(8)
	require.Zero(t, s.len())
	require.Empty(t, ids())
	require.False(t, s.has(8))

	// Stopping early stops the iteration.
	s.add(1)
	s.add(2)
	n := 0
	for range s.all() {
		n++
		break
	}
	require.Equal(t, 1, n)
}

// TestReqSet checks the set of unfinished requests: the first without a
// map, those beside it in one, and removal of either kind.
func TestReqSet(t *testing.T) {
	var s reqSet
	ids := func() []uint64 {
		var out []uint64
		for r := range s.all() {
			out = append(out, r.id)
		}
		slices.Sort(out)
		return out
	}
	a, b, c := &request{id: 1}, &request{id: 2}, &request{id: 3}
	require.Nil(t, s.get(1))
	require.Zero(t, s.len())

	s.add(a)
	require.Same(t, a, s.get(1))
	require.Nil(t, s.more, "one request needs no map")
	require.Equal(t, 1, s.len())

	s.add(b)
	s.add(c)
	require.Same(t, b, s.get(2))
	require.Same(t, c, s.get(3))
	require.Equal(t, 3, s.len())
	require.Equal(t, []uint64{1, 2, 3}, ids())

	s.remove(a) // the one apart leaves; the others stay in the map
	require.Nil(t, s.get(1))
	require.Equal(t, []uint64{2, 3}, ids())

	s.add(a) // it comes back apart
	require.Same(t, a, s.one)
	require.Equal(t, []uint64{1, 2, 3}, ids())

	s.remove(&request{id: 2}) // another record with the same id: not b
	require.Same(t, b, s.get(2))

	s.remove(b)
	s.remove(b) // twice: nothing more happens
	s.remove(c)
	require.Equal(t, []uint64{1}, ids())
	s.remove(a)
	require.Zero(t, s.len())
	require.Empty(t, ids())

	// Stopping early stops the iteration.
	s.add(a)
	s.add(b)
	n := 0
	for range s.all() {
		n++
		break
	}
	require.Equal(t, 1, n)
}
