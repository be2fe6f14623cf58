package main

import (
	"os"
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
