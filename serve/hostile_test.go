package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testkit"
)

// The hostile-serve suite: what a kit, a reader of serve's outputs or the
// kit's own command can do to serve, and what serve must still do —
// report every session, leave nothing running.

// selfKit makes the test binary the kit of Run: n sessions, the first
// failed (TestMain runs servekit.Main when its environment is set).
func selfKit(t *testing.T, n int) []string {
	t.Setenv(servekit.EnvSessions, strconv.Itoa(n))
	t.Setenv(servekit.EnvFailFirst, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self}
}

// lockedBuffer is a writer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunEverySessionReported: a command that opens 200 sessions, the
// first failed: every session reaches every output (text, one JSON
// document, JUnit), the failed one among them, and the run fails.
func TestRunEverySessionReported(t *testing.T) {
	const n = 200
	var text, js lockedBuffer
	junitPath := filepath.Join(t.TempDir(), "serve.xml")
	out, err := Run(testkit.Bounded(t), RunConfig{Command: selfKit(t, n), Deadline: testkit.WaitBound, CommandOutput: &text,
		Text: &text, JSON: &js, JUnitFile: junitPath})
	if err != nil {
		t.Fatal(err)
	}
	if out.Sessions != n || len(out.Failed) != 1 || !strings.HasPrefix(out.Failed[0].Session, "s1-") || out.Command != "" ||
		out.Output != nil || out.OK(true) {
		t.Fatalf("outcome: %d sessions, failed %+v, command %q, output %v", out.Sessions, out.Failed, out.Command, out.Output)
	}
	if got := strings.Count(text.String(), "(kit servekit, session s"); got != n {
		t.Errorf("%d sessions in the text, want %d", got, n)
	}
	var doc struct {
		Protocol string           `json:"protocol"`
		Sessions []*SessionReport `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil || doc.Protocol != Protocol || len(doc.Sessions) != n {
		t.Fatalf("JSON: %v, protocol %q, %d sessions", err, doc.Protocol, len(doc.Sessions))
	}
	if s := doc.Sessions[0]; s.OK || s.NotReported != 1 || !strings.HasPrefix(s.Session, "s1-") {
		t.Errorf("the first session: %s ok %v", s.Session, s.OK)
	}
	b, err := os.ReadFile(junitPath)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil || len(suites.Suites) != n || suites.Suites[0].Failures != 1 {
		t.Fatalf("JUnit: %v, %d suites", err, len(suites.Suites))
	}
	if entries, _ := os.ReadDir(filepath.Dir(junitPath)); len(entries) != 1 {
		t.Errorf("the JUnit file's directory holds %d files, want it alone", len(entries))
	}
}

// TestOnSessionEndStalledReader: sessions end while their reports'
// reader reads nothing. Kits run 150 sessions, 8 at a time; the reader
// waits until the kits can go no further (all 8 waiting for their done)
// or have finished. Every report is delivered once, the calls never
// overlap, and a kit's done is answered only once its report was
// delivered: the kits wait for the reader, no report waits in memory.
func TestOnSessionEndStalledReader(t *testing.T) {
	const n, workers = 150, 8
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	var mu sync.Mutex
	delivered := map[string]int{}
	var inside, overlaps atomic.Int32
	srv, err := New(OnSessionEnd(func(r *SessionReport) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		<-gate
		mu.Lock()
		delivered[r.Session]++
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := testkit.Bounded(t)
	kit := servekit.New(srv.URL())
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var inDone, stalls atomic.Int32
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				o, err := kit.Open(ctx, "servekit", "^ok$")
				if err == nil && i > 0 {
					err = kit.PassOK(ctx, o)
				}
				if err == nil {
					if inDone.Add(1) == workers {
						stalls.Add(1)
						release() // the kits can go no further
					}
					err = kit.Done(ctx, o)
					inDone.Add(-1)
				}
				mu.Lock()
				got := delivered[o.Session]
				mu.Unlock()
				if err == nil && got != 1 {
					err = fmt.Errorf("session %s's done was answered with its report delivered %d times", o.Session, got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	release()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("the kits were held by the reader %d times", stalls.Load())
	if len(delivered) != n || overlaps.Load() != 0 {
		t.Errorf("%d reports delivered, want %d; %d calls overlapped", len(delivered), n, overlaps.Load())
	}
}

// stubborn is serve/testdata/stubborn.sh, a kit that ignores SIGINT and
// SIGTERM and forks a child that does too.
func stubborn(t *testing.T) string {
	p, err := filepath.Abs("testdata/stubborn.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// readPids reads the pids a kit script wrote to file, and has them killed
// when the test ends, whatever it finds.
func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the script did not write its pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	}
	return pids
}

// TestRunStopsTheProcessGroup: a kit that ignores SIGINT and SIGTERM and
// forks a child that does too is stopped, child and all, at its deadline,
// and when serve is interrupted; a kit that exits leaving a child that
// holds its output (a pipe serve copies) is not waited for past the grace
// period, and its child is stopped. Nothing runs once Run returned. The
// time from the deadline or the interruption to Run's return is logged.
func TestRunStopsTheProcessGroup(t *testing.T) {
	const grace = 500 * time.Millisecond
	for _, c := range []string{"deadline", "interrupted", "exited-leaving-a-child"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(testkit.Bounded(t))
			defer cancel()
			pidFile := filepath.Join(t.TempDir(), "pids")
			cfg := RunConfig{Command: []string{stubborn(t), pidFile}, Deadline: testkit.WaitBound, Grace: grace}
			var stopAt atomic.Int64 // when the deadline passed or serve was interrupted
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cfg.CommandOutput = w // the command's own: nothing copies it
			ready := make(chan struct{})
			go func() {
				s := bufio.NewScanner(r)
				for s.Scan() {
					if s.Text() == "ready" {
						close(ready)
					}
				}
			}()
			switch c {
			case "deadline":
				cfg.Deadline = time.Second
			case "interrupted":
				go func() {
					<-ready
					stopAt.Store(time.Now().UnixNano())
					cancel()
				}()
			case "exited-leaving-a-child":
				cfg.Command = []string{"sh", "-c", `sleep 1000 & echo "$$ $!" >"$1"; echo ready`, "sh", pidFile}
				cfg.CommandOutput = &lockedBuffer{} // copied through a pipe the child holds
			}
			start := time.Now()
			out, err := Run(ctx, cfg)
			end := time.Now()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			pids := readPids(t, pidFile)
			switch c {
			case "deadline":
				stopAt.Store(start.Add(cfg.Deadline).UnixNano())
				if !strings.Contains(out.Command, "was stopped: its deadline of 1s passed") {
					t.Errorf("command: %q", out.Command)
				}
			case "interrupted":
				if !strings.Contains(out.Command, "was stopped: serve was interrupted") {
					t.Errorf("command: %q", out.Command)
				}
			case "exited-leaving-a-child":
				if out.Command != "" {
					t.Errorf("command: %q", out.Command)
				}
			}
			if stopAt.Load() != 0 {
				t.Logf("Run returned %v after the stop (grace %v)", end.Sub(time.Unix(0, stopAt.Load())).Round(time.Millisecond), grace)
			} else {
				t.Logf("Run returned %v after it started (grace %v)", end.Sub(start).Round(time.Millisecond), grace)
			}
			for _, pid := range pids {
				if running(pid) {
					t.Errorf("process %d of the kit's still runs", pid)
				}
			}
		})
	}
}
