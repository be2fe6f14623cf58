package serve

import (
	"os"
	"testing"

	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testkit"
)

// TestMain runs the tests; run by Run with servekit's environment, the
// test binary is a kit instead.
func TestMain(m *testing.M) {
	if os.Getenv(servekit.EnvSessions) != "" {
		os.Exit(servekit.Main())
	}
	testkit.Main(m)
}
