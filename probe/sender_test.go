package probe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSenderContexts checks the sender's one context and timer: reused
// while the timer does not fire, replaced once it fired (even after the
// request it bounded had ended), and ended with a deadline as the cause.
func TestSenderContexts(t *testing.T) {
	pr := &prober{cfg: defaults(), ctx: context.Background()}
	pr.cfg.timeout = time.Nanosecond
	s := pr.newSender(nil)
	defer s.close()

	fired := s.arm()
	select {
	case <-fired.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request timer did not fire")
	}
	require.ErrorIs(t, context.Cause(fired), context.DeadlineExceeded, "a timeout is a deadline")
	require.ErrorIs(t, context.Cause(fired), errRequestTimeout)
	s.disarm()

	pr.cfg.timeout = time.Hour
	ctx := s.arm()
	require.NotEqual(t, fired, ctx, "a fired context is replaced")
	require.NoError(t, ctx.Err())
	s.disarm()
	require.Equal(t, ctx, s.arm(), "a context whose timer did not fire serves the next request")
	s.disarm()
	require.NoError(t, ctx.Err())

	s.close()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "close ends the context")
}
