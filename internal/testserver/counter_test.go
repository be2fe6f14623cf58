package testserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

func TestCounterWaitsForAdds(t *testing.T) {
	var c testserver.Counter
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.WaitAtLeast(ctx, 3) }()
	for range 3 {
		c.Add(1)
	}
	require.NoError(t, <-done)
	require.EqualValues(t, 3, c.Load())
	require.NoError(t, c.WaitAtLeast(ctx, 2), "a count already reached returns at once")
}

func TestCounterWaitEndsWithContext(t *testing.T) {
	var c testserver.Counter
	c.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, c.WaitAtLeast(ctx, 2), context.Canceled)
	require.EqualValues(t, 1, c.Load())
}
