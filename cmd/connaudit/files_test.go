package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

// TestUserFilesBounded gives -d @FILE (trace and probe) and -cacert FILE
// what is no regular file, or too large a one: each is refused before it
// is read, where reading it would wait for ever (a FIFO with no writer) or
// without bound (a device). Nothing is sent: the target refuses anyway.
func TestUserFilesBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	t.Cleanup(func() {
		// Let a reader blocked on the FIFO go, should one be.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	sparse := func(name string, size int64) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
		return path
	}
	bigBody := sparse("body", maxBodyFile+1)
	bigCA := sparse("ca.pem", maxCACertFile+1)
	url := "http://" + testserver.ClosedPort(t) + "/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "-d", "@" + fifo, url}, "connaudit trace: -d: " + fifo + " is not a regular file\n"},
		{[]string{"trace", "-d", "@" + dir, url}, "connaudit trace: -d: " + dir + " is not a regular file\n"},
		{[]string{"trace", "-d", "@/dev/null", url}, "connaudit trace: -d: /dev/null is not a regular file\n"},
		{[]string{"trace", "-d", "@" + bigBody, url}, "connaudit trace: -d: " + bigBody + " is larger than the 64 MiB limit\n"},
		{[]string{"probe", "-d", "@" + fifo, url}, "connaudit probe: -d: " + fifo + " is not a regular file\n"},
		{[]string{"probe", "-d", "@" + bigBody, url}, "connaudit probe: -d: " + bigBody + " is larger than the 64 MiB limit\n"},
		{[]string{"probe", "-cacert", fifo, url}, "connaudit probe: -cacert: " + fifo + " is not a regular file\n"},
		{[]string{"probe", "-cacert", "/dev/null", url}, "connaudit probe: -cacert: /dev/null is not a regular file\n"},
		{[]string{"probe", "-cacert", dir, url}, "connaudit probe: -cacert: " + dir + " is not a regular file\n"},
		{[]string{"probe", "-cacert", bigCA, url}, "connaudit probe: -cacert: " + bigCA + " is larger than the 1 MiB limit\n"},
	} {
		code, stdout, stderr := runCLIGuarded(t, tc.args...)
		require.Equal(t, exitUsage, code, "%q: %s", tc.args, stderr)
		require.Empty(t, stdout, "%q", tc.args)
		require.Equal(t, tc.want, stderr, "%q", tc.args)
	}

	// A regular file within the bound is sent.
	small := filepath.Join(dir, "small")
	require.NoError(t, os.WriteFile(small, []byte("body"), 0o600))
	b, err := (&requestFlags{data: "@" + small}).body()
	require.NoError(t, err)
	require.Equal(t, "body", string(b))
	_, err = readUserFile(bigBody, maxBodyFile+1)
	require.NoError(t, err, "the limit itself is allowed")
}

// TestOutputFile checks the report files (probe -o, scenarios -junit):
// opened at once, changed only when the report is written, and removed
// when no report came and the run created them.
func TestOutputFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	created := filepath.Join(dir, "new.json")
	o, err := openOutput(created)
	require.NoError(t, err)
	o.discard()
	require.NoFileExists(t, created, "a file the run created goes when no report comes")

	existing := filepath.Join(dir, "old.json")
	require.NoError(t, os.WriteFile(existing, []byte("an earlier, longer report"), 0o600))
	o, err = openOutput(existing)
	require.NoError(t, err)
	o.discard()
	b, err := os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "an earlier, longer report", string(b), "a file that existed is left as it was")

	o, err = openOutput(existing)
	require.NoError(t, err)
	require.NoError(t, o.write(func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	b, err = os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "new", string(b), "the report replaces the content")

	for _, bad := range []string{filepath.Join(dir, "no", "such", "dir"), dir} {
		_, err := openOutput(bad)
		require.Error(t, err, bad)
	}
	require.NoFileExists(t, filepath.Join(dir, "no"))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, "old.json", strings.Join(names, " "))
}
