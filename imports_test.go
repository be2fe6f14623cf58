package connaudit_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testHelpers are the module's packages meant for tests alone: they may
// link package testing, and no other package may import them.
var testHelpers = []string{
	"github.com/connaudit/connaudit/audit/audittest",
	"github.com/connaudit/connaudit/internal/benchpair",
	"github.com/connaudit/connaudit/internal/testserver",
}

// goList runs "go list" with args in the module and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	require.NoError(t, err, "go list %v: %s", args, out)
	return strings.Fields(string(out))
}

// TestServiceLinksNoTestCode: a service that imports pool and httptrace (the
// tracer and the tracked pool, cheap enough to leave on) links neither
// package testing nor goleak nor testify; no package of the module but the
// test helpers links testing, and none imports a test helper. go list reads
// the imports of the code as it is, so a helper that moves back into a
// production package fails this test.
func TestServiceLinksNoTestCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := goList(t, "-deps", "./pool", "./httptrace")
	for _, bad := range []string{"testing", "go.uber.org/goleak", "github.com/stretchr/testify/require"} {
		require.NotContains(t, deps, bad, "a program importing pool and httptrace links %s", bad)
	}
	for _, pkg := range goList(t, "./...") {
		if slices.Contains(testHelpers, pkg) {
			continue
		}
		deps := goList(t, "-deps", pkg)
		require.NotContains(t, deps, "testing", "%s links package testing", pkg)
		for _, h := range testHelpers {
			require.NotContains(t, deps, h, "%s imports the test helper %s", pkg, h)
		}
	}
}
