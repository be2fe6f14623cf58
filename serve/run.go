package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
)

// RunConfig says what [Run] does: the kit's command it supervises, if
// any, and where the verdicts go.
type RunConfig struct {
	// Command is the kit's command and its arguments, run with
	// CONNAUDIT_URL and CONNAUDIT_CA in its environment, in a process
	// group of its own. Empty: serve until the context ends.
	Command []string
	// Deadline bounds Command (0: no bound). When it passes, or when the
	// context ends, the command's process group is sent SIGTERM, and
	// SIGKILL Grace later if any of it still runs.
	Deadline time.Duration
	// Grace is how long the command's processes have to stop after
	// SIGTERM (0: 3s, time for a kit to tell the server it gives up,
	// which waits up to a second for its connections, and for a runtime's
	// shutdown hooks).
	Grace time.Duration
	// CommandOutput receives Command's stdout and stderr. An *os.File is
	// the command's own (no copy, so nothing waits for a process that
	// holds it); any other writer gets a copy, which ends Grace after the
	// command does. Nil: discarded.
	CommandOutput io.Writer
	// CAFile is where CONNAUDIT_CA, the CA certificate of the HTTPS fault
	// listeners, is written; "": a temporary file, removed at the end.
	CAFile string
	// Text, if not nil, receives each session's verdicts as text
	// ([SessionReport.WriteText] and an empty line) as it ends.
	Text io.Writer
	// JSON, if not nil, receives one JSON document, {"protocol": …,
	// "sessions": [ … ]} ([WriteJSON]'s), each session added as it ends.
	JSON io.Writer
	// JUnitFile, if not "", names a file for the JUnit XML
	// ([WriteJUnit]'s): each session is added, as it ends, to a temporary
	// file beside it, renamed over it at the end. A file that is not a
	// regular file (a device, a pipe) is written as the sessions end.
	JUnitFile string
	// Listening, if not nil, is called once the server listens, before
	// Command starts, with CONNAUDIT_URL (the server's secret key in its
	// path: for the user who runs a kit by hand, never for a log) and
	// CONNAUDIT_CA.
	Listening func(url, caFile string)
}

// defaultGrace is RunConfig.Grace's default.
const defaultGrace = 3 * time.Second

// RunOutcome is what a [Run] found: counts, and of each failed session a
// line's worth for the final status. It does not grow with the sessions'
// verdicts: those went to the outputs as each session ended.
type RunOutcome struct {
	// Sessions counts the sessions that ended; Judged the scenarios
	// judged in them (passed or failed).
	Sessions, Judged int
	// Failed are the sessions whose report is not ok, in the order they
	// ended, each in a line's worth: who, its counts and its error (no
	// results or findings: those were written out).
	Failed []*SessionReport
	// Command says, naming the kit by its script, how the command ended
	// when it did not exit 0: stopped, and why; exited non-zero after the
	// failures its session reported ("kit kits/curl/example.sh exited
	// with status 1 after the failures it reported"), leaving a session unfinished, or with no scenario judged (a
	// failure); crashed. "" if it exited 0 or no command was run.
	Command string
	// Output is the first error writing an output (text, JSON, JUnit);
	// what could not be written is lost.
	Output error
}

// OK reports whether the run passed: no session failed, the command (if
// any) exited 0 having had at least one scenario judged, and every output
// was written.
func (o *RunOutcome) OK(command bool) bool {
	return len(o.Failed) == 0 && o.Command == "" && o.Output == nil && (!command || o.Judged > 0)
}

// Run starts a server with opts and, with a command, runs it as the kit
// and judges what it reports; without one, serves until ctx ends. Each
// session's verdicts go to the outputs as it ends, none kept: any number
// of sessions is reported, whatever the pace of the outputs' readers
// (a slow one slows the kits down; see [OnSessionEnd]). When the command
// exits, or is stopped at its deadline or when ctx ends, nothing it
// started is left running (RunConfig.Deadline), the sessions it left open
// are ended, and Run returns. Its error says why it could not start (the
// server, the CA file, the JUnit file); what went wrong after is in the
// outcome. Run prints nothing: the caller says the outcome.
func Run(ctx context.Context, cfg RunConfig, opts ...Option) (*RunOutcome, error) {
	if cfg.Deadline < 0 || cfg.Grace < 0 {
		return nil, fmt.Errorf("serve: the deadline %v and grace %v must not be negative", cfg.Deadline, cfg.Grace)
	}
	if cfg.Grace == 0 {
		cfg.Grace = defaultGrace
	}
	out := &RunOutcome{}
	rec := &recorder{out: out, text: cfg.Text}
	if cfg.JUnitFile != "" {
		jf, err := createJUnit(cfg.JUnitFile)
		if err != nil {
			return nil, err
		}
		defer jf.discard()
		rec.junit = jf
	}
	srv, err := New(append(append([]Option(nil), opts...), OnSessionEnd(rec.add))...)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ca := cfg.CAFile
	if ca == "" {
		dir, err := os.MkdirTemp("", "connaudit-serve-")
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		defer os.RemoveAll(dir)
		ca = filepath.Join(dir, "ca.pem")
	}
	if err := os.WriteFile(ca, srv.CA(), 0o644); err != nil {
		return nil, fmt.Errorf("serve: writing the CA: %w", err)
	}
	if cfg.JSON != nil {
		rec.setJSON(newJSONStream(cfg.JSON))
	}
	if cfg.Listening != nil {
		cfg.Listening(srv.URL(), ca)
	}
	if len(cfg.Command) > 0 {
		end := runCommand(ctx, cfg, srv.URL(), ca)
		srv.Close() // ends the sessions left open: their reports are recorded
		rec.finish()
		out.Command = end.say(kitName(cfg.Command), out)
		return out, nil
	}
	<-ctx.Done()
	srv.Close()
	rec.finish()
	return out, nil
}

// recorder is a Run's OnSessionEnd: it writes each report to the outputs
// and keeps its counts. The server calls add one report at a time; the
// lock orders them with what Run does before and after.
type recorder struct {
	mu    sync.Mutex
	out   *RunOutcome
	text  io.Writer
	json  *jsonStream
	junit *junitFile
}

func (rec *recorder) setJSON(js *jsonStream) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.json = js
	rec.fail(js.err)
}

func (rec *recorder) add(r *SessionReport) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	o := rec.out
	o.Sessions++
	o.Judged += r.Passed + r.Failed
	if !r.OK {
		o.Failed = append(o.Failed, &SessionReport{Protocol: r.Protocol, Session: r.Session, Kit: r.Kit, Client: r.Client,
			Passed: r.Passed, Failed: r.Failed, NotConfigurable: r.NotConfigurable, Skipped: r.Skipped,
			NotReported: r.NotReported, OpenAtDone: r.OpenAtDone, Error: r.Error, OK: r.OK, ElapsedMS: r.ElapsedMS})
	}
	if rec.text != nil {
		err := r.WriteText(rec.text)
		if err == nil {
			_, err = io.WriteString(rec.text, "\n")
		}
		rec.fail(err)
	}
	if rec.json != nil {
		rec.fail(rec.json.add(r))
	}
	if rec.junit != nil {
		rec.fail(rec.junit.add(r))
	}
}

// finish writes the outputs' ends.
func (rec *recorder) finish() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.json != nil {
		rec.fail(rec.json.close())
	}
	if rec.junit != nil {
		rec.fail(rec.junit.commit())
	}
}

func (rec *recorder) fail(err error) {
	if err != nil && rec.out.Output == nil {
		rec.out.Output = err
	}
}

// commandEnd is how a kit's command ended: stopped, with the reason;
// exited, with its exit code (-1: a signal ended it); or failed to start
// or to be waited for, with err.
type commandEnd struct {
	stopped string
	exited  bool
	code    int
	status  string // the exit status in words when a signal ended it
	err     error
}

// runCommand runs the kit's command to its end, or stops it at its
// deadline or when ctx ends, and leaves nothing of its process group
// running; it says how the command ended.
func runCommand(ctx context.Context, cfg RunConfig, url, ca string) commandEnd {
	args := cfg.Command
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "CONNAUDIT_URL="+url, "CONNAUDIT_CA="+ca)
	cmd.Stdout, cmd.Stderr = cfg.CommandOutput, cfg.CommandOutput
	cmd.WaitDelay = cfg.Grace // a copy of the output ends then, whoever holds the pipe
	g := &group{cmd: cmd}
	g.prepare()
	if err := cmd.Start(); err != nil {
		return commandEnd{err: err}
	}
	g.exited = make(chan struct{})
	go func() {
		g.err = cmd.Wait()
		close(g.exited)
	}()
	var deadline <-chan time.Time
	if cfg.Deadline > 0 {
		t := time.NewTimer(cfg.Deadline)
		defer t.Stop()
		deadline = t.C
	}
	stopped := ""
	select {
	case <-g.exited:
	case <-deadline:
		stopped = fmt.Sprintf("its deadline of %v passed", cfg.Deadline)
	case <-ctx.Done():
		stopped = "serve was interrupted"
	}
	g.stop(cfg.Grace)
	var ee *exec.ExitError
	switch {
	case stopped != "":
		return commandEnd{stopped: stopped}
	case g.err == nil, errors.Is(g.err, exec.ErrWaitDelay): // exited 0; what held its output was stopped
		return commandEnd{exited: true}
	case errors.As(g.err, &ee):
		return commandEnd{exited: true, code: ee.ExitCode(), status: ee.String()}
	}
	return commandEnd{err: g.err}
}

// say says how the kit's command ended, when that is not all well ("" if
// it exited 0), once its sessions ended (out): a non-zero exit that
// follows the failures its sessions reported is said as such; one that
// left a session unfinished, or had no scenario judged, reads as the
// failure it is.
func (e commandEnd) say(kit string, out *RunOutcome) string {
	cut := slices.ContainsFunc(out.Failed, func(r *SessionReport) bool { return r.Error != "" })
	sessions := "its session"
	if out.Sessions > 1 {
		sessions = "a session of its"
	}
	switch {
	case e.stopped != "":
		return fmt.Sprintf("kit %s was stopped: %s", kit, e.stopped)
	case !e.exited:
		return fmt.Sprintf("kit %s could not run: %v", kit, e.err)
	case e.code == 0:
		return ""
	case e.code < 0:
		return fmt.Sprintf("kit %s crashed (%s)", kit, e.status)
	case cut:
		return fmt.Sprintf("kit %s failed: it exited with status %d, leaving %s unfinished", kit, e.code, sessions)
	case len(out.Failed) > 0:
		return fmt.Sprintf("kit %s exited with status %d after the failures it reported", kit, e.code)
	case out.Judged == 0:
		return fmt.Sprintf("kit %s failed: it exited with status %d before any scenario was judged", kit, e.code)
	}
	return fmt.Sprintf("kit %s exited with status %d, though no session it opened failed (its output says why)", kit, e.code)
}

// kitName names a kit's command for a person: the script an interpreter
// runs (its first argument that is not an option, when that is a file:
// "kits/python/example_requests.py" of "python
// kits/python/example_requests.py"), else the command line, cut to 60
// columns and quoted when it has arguments; its secrets masked.
func kitName(args []string) string {
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
			return redact.Text(a)
		}
		break
	}
	if len(args) == 1 {
		return redact.Text(args[0])
	}
	return redact.Text(`"` + text.Cut(strings.Join(args, " "), 60) + `"`)
}

// group is a command's process group: the command and every process it
// started that did not leave the group.
type group struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned, with err
	err    error
}

// stop ends what is left of the group: SIGTERM to each of its processes,
// then, if any still runs grace later, SIGKILL. It returns once the
// command was waited for and no process of the group runs (or, should one
// outlive SIGKILL, in an uninterruptible sleep, grace after it).
func (g *group) stop(grace time.Duration) {
	if g.done() {
		return
	}
	exited := g.exited
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for _, kill := range []bool{false, true} {
		g.signal(kill)
		t := time.NewTimer(grace)
		for expired := false; !expired && !g.done(); {
			select {
			case <-exited:
				exited = nil
			case <-tick.C:
			case <-t.C:
				expired = true
			}
		}
		t.Stop()
		if g.done() {
			return
		}
	}
}

// done reports whether the command was waited for and no process of its
// group runs.
func (g *group) done() bool {
	select {
	case <-g.exited:
		return !g.alive()
	default:
		return false
	}
}
