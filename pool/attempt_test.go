package pool

import (
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/hook"
)

// TestLastAttempt: what the pool says of the last request handed a
// connection follows its counters: a byte written since, the server's
// close read before or after the request's first write, and how long the
// connection had been idle.
func TestLastAttempt(t *testing.T) {
	p, err := New()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	t0 := time.Now()
	conn := func(id uint64, written int64, readErr error, writesAtReadErr int64) *connState {
		c := &connState{Conn: Conn{ID: id}, io: new(connIO), writesAtGot: 3, writtenAtGot: 100,
			readErr: readErr, writesAtReadErr: writesAtReadErr,
			gotIdle: true, idleAtGot: stamp{t0, 0}, gotAt: stamp{t0, 2 * time.Second}}
		c.io.written.Store(written)
		return c
	}
	p.mu.Lock()
	p.conns[1] = conn(1, 100, io.EOF, 3)                 // closed before the request's write, which wrote nothing
	p.conns[2] = conn(2, 150, io.EOF, 3)                 // closed first; the write went out after
	p.conns[3] = conn(3, 150, syscall.ECONNRESET, 4)     // reset after the request was written
	p.conns[4] = conn(4, 150, nil, 0)                    // no close of the server's
	p.closed = append(p.closed, conn(5, 150, io.EOF, 4)) // forgotten as open, still known
	p.conns[6] = &connState{Conn: Conn{ID: 6}, io: new(connIO), h2: true}
	p.mu.Unlock()
	for id, want := range map[uint64]hook.ConnAttempt{
		1: {Wrote: false, ServerClosed: true, ClosedFirst: true, Idle: 2 * time.Second},
		2: {Wrote: true, ServerClosed: true, ClosedFirst: true, Idle: 2 * time.Second},
		3: {Wrote: true, ServerClosed: true, Idle: 2 * time.Second},
		4: {Wrote: true, Idle: 2 * time.Second},
		5: {Wrote: true, ServerClosed: true, Idle: 2 * time.Second},
		6: {H2: true},
	} {
		got, ok := hook.LastAttempt(p, id)
		require.True(t, ok, "conn %d", id)
		require.Equal(t, want, got, "conn %d", id)
	}
	_, ok := hook.LastAttempt(p, 99)
	require.False(t, ok)
}
