package testserver

import (
	"context"
	"net"
	"sync/atomic"
)

// HeldDial dials as a net.Dialer does, but holds its Nth dial before it
// begins: Dialed receives when that dial is reached, and the dial goes on
// once Proceed is closed (or fails with its context's error if that ends
// first). A test uses its DialContext as a transport's, to open a
// connection after the request it was dialed for took another.
type HeldDial struct {
	N       int32
	Dialed  chan struct{}
	Proceed chan struct{}
	dials   atomic.Int32
	d       net.Dialer
}

// HoldDial returns a HeldDial that holds the nth dial.
func HoldDial(n int32) *HeldDial {
	return &HeldDial{N: n, Dialed: make(chan struct{}, 1), Proceed: make(chan struct{})}
}

// DialContext dials network and addr, holding the Nth dial.
func (h *HeldDial) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if h.dials.Add(1) == h.N {
		h.Dialed <- struct{}{}
		select {
		case <-h.Proceed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.d.DialContext(ctx, network, addr)
}
