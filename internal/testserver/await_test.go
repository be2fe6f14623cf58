package testserver

import "testing"

// TestAwait: a signal that came (a closed channel) or comes (a send) ends
// the wait at once.
func TestAwait(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	Await(t, closed, "the closed signal")
	sent := make(chan struct{}, 1)
	sent <- struct{}{}
	Await(t, sent, "the sent signal")
}
