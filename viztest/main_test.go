package viztest

import (
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
)

// TestMain fails the package if a goroutine outlives its tests: the
// browser's, once Close returned, included.
func TestMain(m *testing.M) { testkit.Main(m) }
