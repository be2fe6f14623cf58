package notify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestWaitWakes checks that a waiter sees each change signalled, and that
// a condition already true returns at once.
func TestWaitWakes(t *testing.T) {
	var (
		mu sync.Mutex
		c  notify.Changes
		n  int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- notify.Wait(ctx, &mu, &c, func() bool { return n >= 3 }) }()
	for range 3 {
		mu.Lock()
		n++
		c.Signal()
		mu.Unlock()
	}
	require.NoError(t, <-done)
	require.NoError(t, notify.Wait(ctx, &mu, &c, func() bool { return n == 3 }))
}

// TestWaitEnds checks that a wait whose condition never holds ends with
// its context's error.
func TestWaitEnds(t *testing.T) {
	var (
		mu sync.Mutex
		c  notify.Changes
	)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, notify.Wait(ctx, &mu, &c, func() bool { return false }), context.Canceled)
}

// TestNext checks that Next's channel is closed by the next Signal, and
// that a Signal with nobody waiting leaves nothing behind.
func TestNext(t *testing.T) {
	var c notify.Changes
	c.Signal() // nobody waits
	ch := c.Next()
	require.Equal(t, ch, c.Next(), "waiters share one channel until the next change")
	select {
	case <-ch:
		t.Fatal("closed before any change")
	default:
	}
	c.Signal()
	_, open := <-ch
	require.False(t, open)
	require.NotEqual(t, ch, c.Next(), "a new channel for the change after")
}
