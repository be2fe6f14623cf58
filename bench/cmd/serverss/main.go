// Command serverss measures the resident memory of a `connaudit serve`
// server as sessions end: it starts CONNAUDIT serve in a process of its
// own (its verdicts to /dev/null), runs -n sessions one after the other
// on the "ok" scenario through the control API (open, the scenario's
// request and /ok, report, done), and samples the server's VmRSS
// (/proc/PID/status) before the first session and after each count of
// -at. It prints one line per sample, then interrupts the server.
//
//	serverss -connaudit PATH [-n 10000] [-at 0,1000,5000,10000] [-fail] [-json]
//
// -fail leaves every session's scenario unreported (a failed session, of
// which serve keeps a line for its exit status); -json has serve write
// the JSON document instead of the text. Linux only (/proc).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connaudit/connaudit/internal/servekit"
)

func main() {
	bin := flag.String("connaudit", "", "the connaudit command to measure")
	n := flag.Int("n", 10000, "sessions to run")
	at := flag.String("at", "0,1000,5000,10000", "sample the RSS after these many sessions")
	fail := flag.Bool("fail", false, "leave each session's scenario unreported: every session fails")
	asJSON := flag.Bool("json", false, "serve -json: the verdicts as one JSON document")
	flag.Parse()
	if err := run(*bin, *n, *at, *fail, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "serverss:", err)
		os.Exit(1)
	}
}

func run(bin string, n int, atList string, fail, asJSON bool) error {
	if bin == "" {
		return errors.New("-connaudit is required")
	}
	var at []int
	for _, f := range strings.Split(atList, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 || v > n {
			return fmt.Errorf("-at %q: each count must be in 0..%d", atList, n)
		}
		at = append(at, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	args := []string{"serve", "-run", "^ok$"}
	if asJSON {
		args = append(args, "-json")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = nil // /dev/null
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	url := ""
	for url == "" && lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "CONNAUDIT_URL="); ok {
			url = strings.Fields(rest)[0]
		}
	}
	if url == "" {
		return errors.New("serve said no CONNAUDIT_URL")
	}
	go io.Copy(io.Discard, stderr) // its lines of failed sessions
	pid := cmd.Process.Pid
	fmt.Printf("%-9s %9s %9s\n", "sessions", "VmRSS_kB", "VmHWM_kB")
	sample := func(done int) error {
		rss, hwm, err := memory(pid)
		if err != nil {
			return err
		}
		fmt.Printf("%-9d %9d %9d\n", done, rss, hwm)
		return nil
	}
	kit := servekit.New(url)
	start := time.Now()
	for i := 0; i <= n; i++ {
		if slices.Contains(at, i) {
			if err := sample(i); err != nil {
				return err
			}
		}
		if i == n {
			break
		}
		if _, err := kit.Session(ctx, "servekit", fail); err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
	}
	took := time.Since(start)
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code, err = ee.ExitCode(), nil
	}
	fmt.Printf("%d sessions in %v; serve exited %d\n", n, took.Round(time.Millisecond), code)
	return err
}

// memory reads a process's VmRSS and VmHWM, in kB.
func memory(pid int) (rss, hwm int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm, nil
}
