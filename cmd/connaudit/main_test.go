package main

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests; run by connaudit serve with servekit's
// environment, the test binary is a kit instead.
func TestMain(m *testing.M) {
	if os.Getenv(servekit.EnvSessions) != "" {
		os.Exit(servekit.Main())
	}
	testkit.Main(m)
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "version")
	require.Equal(t, exitOK, code, errOut)
	require.True(t, strings.HasPrefix(out, "connaudit "), out)
	require.Empty(t, errOut)
	code, out, errOut = runCLI(t, "version", "extra")
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `connaudit version: unexpected argument "extra"`)
	code, out, errOut = runCLI(t, "version", "--json")
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "flag provided but not defined: -json")
	code, out, errOut = runCLI(t, "version", "-h")
	require.Equal(t, exitOK, code, "help, as for every command")
	require.Contains(t, out, "usage: connaudit version")
	require.Empty(t, errOut, "help asked for goes to stdout")
}

// version says the commit the binary was built from, as debug.ReadBuildInfo
// has it (vcs.revision, vcs.time, vcs.modified), and says when it does
// not know it; its -h has no empty "flags:" heading.
func TestVersionSaysTheCommit(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/connaudit/connaudit", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-05T16:37:44Z"}, {Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, "connaudit v0.3.0, commit 0123456789ab (2026-12-05T16:37:44Z, modified), go1.26.8", versionText(bi))
	bi.Settings = bi.Settings[:3]
	require.Equal(t, "connaudit v0.3.0, commit 0123456789ab (2026-12-05T16:37:44Z), go1.26.8", versionText(bi))
	bi.Main.Version, bi.Settings = "", nil
	require.Equal(t, "connaudit (devel), commit unknown (built without VCS stamping), go1.26.8", versionText(bi))
	require.Equal(t, "connaudit (devel), commit unknown", versionText(nil))

	code, out, _ := runCLI(t, "version")
	require.Equal(t, exitOK, code)
	require.True(t, strings.HasPrefix(out, "connaudit ") && strings.Contains(out, ", commit "), out)
	code, out, _ = runCLI(t, "version", "-h")
	require.Equal(t, exitOK, code)
	require.NotContains(t, out, "flags:", out)
	require.Contains(t, out, "exit status:")
	_, out, _ = runCLI(t, "trace", "-h")
	require.Contains(t, out, "flags:", "a command with flags lists them")
}
