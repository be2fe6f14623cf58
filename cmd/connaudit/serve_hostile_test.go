package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

// selfKit makes the test binary the kit of `serve -- CMD`: n sessions, the
// first failed (TestMain runs servekit.Main when its environment is set).
func selfKit(t *testing.T, n int) []string {
	t.Setenv(servekit.EnvSessions, strconv.Itoa(n))
	t.Setenv(servekit.EnvFailFirst, "1")
	self, err := os.Executable()
	require.NoError(t, err)
	return []string{self}
}

// TestServeEverySessionReported: a command that opens 200 sessions, the
// first failed, gets every session in every output — the text, the JSON
// document and the JUnit file — the failed one first, and exit 1.
func TestServeEverySessionReported(t *testing.T) {
	const n = 200
	kit := selfKit(t, n)

	code, out, errOut := runCLI(t, append([]string{"serve", "--"}, kit...)...)
	require.Equal(t, exitFail, code, "stderr: %s", errOut)
	require.Equal(t, n, strings.Count(out, "(kit servekit, session s"), "sessions in the text")
	require.Contains(t, out, "(kit servekit, session s1-")
	require.Contains(t, errOut, "connaudit serve: servekit s1-")

	junit := filepath.Join(t.TempDir(), "serve.xml")
	code, out, errOut = runCLI(t, append([]string{"serve", "-json", "-junit", junit, "--"}, kit...)...)
	require.Equal(t, exitFail, code, "stderr: %s", errOut)
	var doc struct {
		Protocol string `json:"protocol"`
		Sessions []struct {
			Session string `json:"session"`
			OK      bool   `json:"ok"`
		} `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), "one JSON document")
	require.Equal(t, "connaudit.serve/v1", doc.Protocol)
	require.Len(t, doc.Sessions, n)
	failed := 0
	for _, s := range doc.Sessions {
		if !s.OK {
			failed++
			require.True(t, strings.HasPrefix(s.Session, "s1-"), "the failed session is the first: %s", s.Session)
		}
	}
	require.Equal(t, 1, failed)
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var suites struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b, &suites))
	require.Len(t, suites.Suites, n)
}

// gateWriter holds every write until open is closed: a reader of stdout
// that reads nothing for a while.
type gateWriter struct {
	open chan struct{}
	once sync.Once
	mu   sync.Mutex
	buf  strings.Builder
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gateWriter) release() { g.once.Do(func() { close(g.open) }) }

func (g *gateWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// TestServeStalledReaderLosesNothing: plain serve whose stdout is not
// read while kits run 150 sessions, 8 at a time, the first failed. The
// reader waits until the kits can go no further (all 8 waiting for their
// done) or have finished; then every session is in the output, and the
// exit status is 1.
func TestServeStalledReaderLosesNothing(t *testing.T) {
	const n, workers = 150, 8
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errOut := &lineSignal{want: "CONNAUDIT_URL=", got: make(chan string, 1)}
	out := &gateWriter{open: make(chan struct{})}
	defer out.release()
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"serve", "-run", "^ok$"}, out, errOut) }()
	var line string
	select {
	case line = <-errOut.got:
	case <-time.After(testkit.WaitBound):
		t.Fatal("no address said")
	}
	url := strings.Fields(strings.SplitN(line, "CONNAUDIT_URL=", 2)[1])[0]
	kit := servekit.New(url)
	var inDone atomic.Int32
	stuck := 0
	var stuckMu sync.Mutex
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				o, err := kit.Open(ctx, "servekit", "^ok$")
				if err == nil && i > 0 {
					err = kit.PassOK(ctx, o)
				}
				if err != nil {
					errs <- err
					return
				}
				if inDone.Add(1) == workers {
					stuckMu.Lock()
					stuck++
					stuckMu.Unlock()
					out.release() // the kits can go no further
				}
				err = kit.Done(ctx, o)
				inDone.Add(-1)
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	out.release()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cancel()
	select {
	case c := <-code:
		require.Equal(t, exitFail, c)
	case <-time.After(testkit.WaitBound):
		t.Fatal("serve did not stop when interrupted")
	}
	t.Logf("the kits were held by the reader %d times", stuck)
	require.Equal(t, n, strings.Count(out.String(), "(kit servekit, session s"), "sessions in the text")
	require.Equal(t, 1, strings.Count(out.String(), "0 passed, 0 failed, 0 not configurable, 0 skipped, 1 not reported"))
}

// running reports whether the process pid runs: it exists and is no
// zombie (a process killed whose parent is gone waits as a zombie until
// init reaps it, and an init that reaps nothing leaves it: it runs no
// more).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // no /proc: trust kill
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestServeDeadlineLeavesNothing: a kit that ignores SIGINT and SIGTERM
// and forks a child that does too, run with -deadline: when serve
// returns, neither runs. The time from the deadline to serve's return is
// logged.
func TestServeDeadlineLeavesNothing(t *testing.T) {
	script, err := filepath.Abs("../../serve/testdata/stubborn.sh")
	require.NoError(t, err)
	pidFile := filepath.Join(t.TempDir(), "pid")
	const deadline = 2 * time.Second
	start := time.Now()
	code, _, errOut := runCLI(t, "serve", "-deadline", deadline.String(), "--", script, pidFile)
	took := time.Since(start)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the script did not start its child within the deadline")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	t.Logf("serve returned %v after the deadline", (took - deadline).Round(time.Millisecond))
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "was stopped")
	require.False(t, running(pid), "the kit's child %d still runs", pid)
}

// keyInURL matches CONNAUDIT_URL's key in a text.
var keyInURL = regexp.MustCompile(`/k/[0-9a-f]{32}`)

// TestServeKeyOnlyInTheAddressLine: plain serve says CONNAUDIT_URL, key
// included, once on stderr, for the user who runs a kit by hand; a kit
// that quotes it in every text it sends gets it into no other output:
// the text or JSON verdicts, the JUnit file, stderr's other lines. Under
// serve -- CMD the key is in no output of serve's at all.
func TestServeKeyOnlyInTheAddressLine(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		errOut := &lineSignal{want: "CONNAUDIT_URL=", got: make(chan string, 1)}
		out := &lineSignal{want: "\x00", got: make(chan string, 1)}
		junit := filepath.Join(t.TempDir(), "serve.xml")
		args := []string{"serve", "-run", "^ok$", "-junit", junit}
		if asJSON {
			args = append(args, "-json")
		}
		code := make(chan int, 1)
		go func() { code <- run(ctx, args, out, errOut) }()
		var line string
		select {
		case line = <-errOut.got:
		case <-time.After(testkit.WaitBound):
			t.Fatal("no address said")
		}
		url := strings.Fields(strings.SplitN(line, "CONNAUDIT_URL=", 2)[1])[0]
		key := keyInURL.FindString(url)
		require.NotEmpty(t, key, "CONNAUDIT_URL %s has no key", url)
		kit := servekit.New(url)
		o, err := kit.Open(ctx, "x "+url, "^ok$")
		require.NoError(t, err)
		_, err = kit.Post(ctx, o.ReportURL, map[string]any{"scenario": "ok", "config": url,
			"outcome": map[string]any{"error": map[string]string{"kind": "other", "message": "GET " + url + " failed"}}}, nil)
		require.NoError(t, err)
		_, err = kit.Post(ctx, o.DoneURL, map[string]any{"error": "gave up on " + url}, nil)
		require.NoError(t, err)
		cancel()
		select {
		case c := <-code:
			require.Equal(t, exitFail, c)
		case <-time.After(testkit.WaitBound):
			t.Fatal("serve did not stop when interrupted")
		}
		b, err := os.ReadFile(junit)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(errOut.String(), key), "stderr: %s", errOut.String())
		require.Contains(t, line, key, "the key is in the address line")
		for name, text := range map[string]string{"stdout": out.String(), "JUnit": string(b)} {
			require.NotContains(t, text, key, "%s", name)
			require.Contains(t, text, "REDACTED", "%s: the kit's texts, the key masked", name)
		}
	}
	code, out, errOut := runCLI(t, append([]string{"serve", "-json", "--"}, selfKit(t, 3)...)...)
	require.Equal(t, exitFail, code, errOut)
	require.False(t, keyInURL.MatchString(out+errOut), "a key in serve -- CMD's output:\n%s\n%s", out, errOut)
}

// TestServeKitOutputAsIs: the kit's output is its own, not serve's
// lines: it reaches stderr unescaped, the file itself when stderr is one,
// so that nothing copies it and a process the kit leaves holding it is
// not waited for (it is stopped once the kit exits). The time serve took
// is logged.
func TestServeKitOutputAsIs(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r) // to EOF: every writer of the pipe closed it
		got <- string(b)
	}()
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	code := run(t.Context(), []string{"serve", "--", "sh", "-c",
		`printf 'one\033[1m\ttwo\nthree\n' >&2; sleep 1000 & echo $! >"$1"`, "sh", pidFile}, io.Discard, w)
	took := time.Since(start)
	w.Close()
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	t.Logf("serve returned %v after it started", took.Round(time.Millisecond))
	require.Equal(t, exitFail, code, "nothing judged")
	require.False(t, running(pid), "the kit's child %d still runs", pid)
	select {
	case out := <-got:
		require.True(t, strings.HasPrefix(out, "one\x1b[1m\ttwo\nthree\n"), "%q", out)
	case <-time.After(testkit.WaitBound):
		t.Fatal("stderr is still held open")
	}
}
