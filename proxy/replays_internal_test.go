package proxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A request the proxy reset, whose end is accounted for after the
// client's retry of it was served (its handler returned later), is one
// hidden retry with that retry, whatever order the two ends come in; the
// next request of the same kind repeats nothing that failed.
func TestReplayAccountedOutOfOrder(t *testing.T) {
	for _, order := range [][]uint64{{1, 2, 3, 4}, {1, 3, 2, 4}, {3, 1, 2, 4}, {1, 3, 4, 2}} {
		p, err := New("http://127.0.0.1:1")
		require.NoError(t, err)
		t0 := time.Now()
		attempts := map[uint64]*exchange{}
		for id := uint64(1); id <= 4; id++ {
			a := Attempt{ID: id, Method: "GET", Path: "/x", Start: t0.Add(time.Duration(id) * time.Millisecond),
				Outcome: outcomeStatus, Status: 200}
			if id == 2 {
				a.Outcome, a.Status = outcomeFault, 0
			}
			attempts[id] = &exchange{a: a, w: &statusWriter{}, body: &digestBody{}, method: "GET"}
		}
		for _, id := range order {
			p.finish("c", attempts[id])
		}
		require.Len(t, p.replays, 1, "ends in the order %v: %+v", order, p.replays)
		r := p.replays[0]
		require.Equal(t, classHiddenRetry, r.Class)
		require.EqualValues(t, 2, r.First.ID, "order %v", order)
		require.EqualValues(t, 3, r.Again.ID, "order %v", order)
		require.NoError(t, p.Close())
	}
}
