package httptrace_test

import (
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
)

// TestMain fails the run if any test, example or benchmark leaves a
// goroutine behind: a connection's read or write loop, a dial, a server.
func TestMain(m *testing.M) { testkit.Main(m) }
