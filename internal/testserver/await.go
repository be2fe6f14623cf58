package testserver

import (
	"testing"
	"time"
)

// AwaitBound is how long Await waits: far beyond what any signal of a
// test's own loopback traffic takes, short of the go test timeout.
const AwaitBound = 10 * time.Second

// Await waits until ch is closed or sends, and fails the test if that does
// not come within AwaitBound: a signal that never comes (a fault that never
// lets the client leave, say) fails the test instead of hanging it.
func Await(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(AwaitBound)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s did not come within %v", what, AwaitBound)
	}
}
