package probe_test

import (
	"bufio"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// daemon is a real server the tests start in the foreground (nginx,
// Apache), in a process group of its own, with its error log on stderr.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	ready   chan struct{} // closed once its log says it serves
	exited  chan struct{} // closed when the process ended
	waitErr error

	mu     sync.Mutex
	output strings.Builder // its error log (stderr)
}

// startDaemon starts cmd, named name in failure messages, and waits
// (bounded by guard) until a line of its error log contains readyMarker.
// The daemon is killed when the test ends.
func startDaemon(t *testing.T, name string, cmd *exec.Cmd, readyMarker string) *daemon {
	t.Helper()
	d := &daemon{name: name, cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop ends it whole
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			d.mu.Lock()
			d.output.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if !announced && strings.Contains(sc.Text(), readyMarker) {
				announced = true
				close(d.ready)
			}
		}
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(d.stop)
	select {
	case <-d.ready:
	case <-d.exited:
		t.Fatalf("%s exited at start: %v\n%s", name, d.waitErr, d.diagnose())
	case <-time.After(guard):
		t.Fatalf("%s did not start within %s\n%s", name, guard, d.diagnose())
	}
	return d
}

// stop kills the daemon's process group and waits for it to exit.
// Stopping twice is harmless.
func (d *daemon) stop() {
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.exited
}

// quit stops the daemon gracefully with sig (it finishes, and logs, the
// requests it has), so that its access log is complete; it kills it if it
// has not exited within the guard.
func (d *daemon) quit(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(sig))
	// A daemon reads a signal in its event loop: one that arrives before
	// it first blocks there is seen at its next event, which may never
	// come. Sent again until it exits.
	again := time.NewTicker(100 * time.Millisecond)
	defer again.Stop()
	bound := time.NewTimer(guard)
	defer bound.Stop()
	for {
		select {
		case <-d.exited:
			return
		case <-again.C:
			_ = d.cmd.Process.Signal(sig)
		case <-bound.C:
			d.stop()
			t.Fatalf("%s did not quit within %s\n%s", d.name, guard, d.diagnose())
		}
	}
}

// diagnose returns what the daemon logged, for a failure message.
func (d *daemon) diagnose() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.name + " error log:\n" + d.output.String()
}
