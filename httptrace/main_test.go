package httptrace_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test, example or benchmark leaves a
// goroutine behind: a connection's read or write loop, a dial, a server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
