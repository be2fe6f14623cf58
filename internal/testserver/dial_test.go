package testserver_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
)

// TestHoldDial: the dials before the Nth go straight on; the Nth signals
// and waits for Proceed, or fails when its context ends first.
func TestHoldDial(t *testing.T) {
	ln := testserver.Raw(t, func(net.Conn) {})
	addr := ln.Addr().String()
	ctx := testkit.Bounded(t)

	h := testserver.HoldDial(2)
	c, err := h.DialContext(ctx, "tcp", addr)
	require.NoError(t, err)
	c.Close()
	done := make(chan error, 1)
	go func() {
		c, err := h.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	testserver.Await(t, h.Dialed, "the held dial")
	select {
	case err := <-done:
		t.Fatalf("the held dial ended before Proceed: %v", err)
	default:
	}
	close(h.Proceed)
	require.NoError(t, <-done)

	h = testserver.HoldDial(1)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := h.DialContext(cctx, "tcp", addr)
		done <- err
	}()
	testserver.Await(t, h.Dialed, "the held dial")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
