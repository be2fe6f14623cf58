// Package testkit is what the tests of every package of the module, and of
// its side modules, share: the TestMain that fails a package whose tests
// leave a goroutine behind, and the bound on every wait of a test. It
// links testing and goleak; no production package imports it.
package testkit

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs a package's tests and fails them if a goroutine they started
// is still running once they end (goleak). Call it from TestMain:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
func Main(m *testing.M) { goleak.VerifyTestMain(m) }

// WaitBound bounds every wait of a test: generous, because it is only hit
// when the awaited thing never happens.
const WaitBound = 10 * time.Second

// Bounded returns a context that ends after WaitBound or with the test.
func Bounded(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitBound)
	t.Cleanup(cancel)
	return ctx
}
