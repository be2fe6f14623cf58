package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/serve"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", stdout, stderr, "[-addr HOST:PORT] [-ca FILE] [-run P] [-skip P] [-source-numbers] [-json]\n"+
		"                       [-junit F] [-html F] [-deadline D] [-server-idle-timeout D] [-- CMD ARGS…]")
	addr := fs.String("addr", "127.0.0.1:0", "the control API's address (CONNAUDIT_URL); faults stay on 127.0.0.1")
	caPath := fs.String("ca", "", "write the HTTPS listeners' CA certificate here (default: a temporary file)")
	run := fs.String("run", "", "offer only the scenarios whose name matches this regular expression")
	skip := fs.String("skip", "", "leave out the scenarios whose name matches this regular expression")
	sourceNumbers := fs.Bool("source-numbers", false, "serve A6, A8 and A9 at the source's own numbers, not scaled down")
	asJSON := fs.Bool("json", false, "write the verdicts as JSON")
	junit := fs.String("junit", "", "also write the verdicts as JUnit XML to this file")
	var pics pictureFlags
	pics.register(fs.FlagSet, false)
	deadline := fs.Duration("deadline", 20*time.Minute, "bound on CMD: its process group is sent SIGTERM then, SIGKILL 3s later")
	serverIdle := fs.Duration("server-idle-timeout", 60*time.Second, "the servers' keep-alive timeout a client's idle timeout is judged against\n(connaudit probe -find-idle-timeout measures it)")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	cmdArgs := fs.Args()
	dashed := len(args) > 0 && containsArg(args, "--")
	if len(cmdArgs) > 0 && !dashed {
		return fs.usageError("unexpected argument %q (the command to run follows --)", fs.Arg(0))
	}
	if dashed && len(cmdArgs) == 0 {
		return fs.usageError("no command after --")
	}
	if *deadline <= 0 {
		return fs.usageError("-deadline %v must be positive", *deadline)
	}
	if *serverIdle <= 0 {
		return fs.usageError("-server-idle-timeout %v must be positive", *serverIdle)
	}
	opts := []serve.Option{serve.Addr(*addr), serve.ServerIdleTimeout(*serverIdle)}
	for _, p := range []struct {
		name, v string
	}{{"run", *run}, {"skip", *skip}} {
		if p.v == "" {
			continue
		}
		if _, err := regexp.Compile(p.v); err != nil {
			return fs.usageError("bad -%s pattern: %v", p.name, err)
		}
	}
	opts = append(opts, serve.Select(compileOrNil(*run), compileOrNil(*skip)))
	if *sourceNumbers {
		opts = append(opts, serve.SourceNumbers())
	}
	if host, _, err := net.SplitHostPort(*addr); err != nil {
		return fs.usageError("-addr %q: %v", *addr, err)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(stderr, "connaudit serve: warning: %s is not loopback: CONNAUDIT_URL and its key travel in clear text\n", *addr)
		opts = append(opts, serve.AllowRemote())
	}
	if dashed {
		if _, err := exec.LookPath(cmdArgs[0]); err != nil {
			return fs.usageError("%v", err)
		}
	}
	// CMD's output is its own, not our lines: it goes to stderr as is, the
	// file itself when stderr is one, so that nothing copies it (and no
	// process CMD leaves holding it is waited for).
	kitOut := stderr
	if p, ok := stderr.(printableWriter); ok {
		kitOut = p.w
	}
	cfg := serve.RunConfig{Deadline: *deadline, CAFile: *caPath, JUnitFile: *junit, CommandOutput: kitOut}
	if dashed {
		cfg.Command = cmdArgs
	} else {
		cfg.Listening = func(url, ca string) {
			fmt.Fprintf(stderr, "connaudit serve: CONNAUDIT_URL=%s CONNAUDIT_CA=%s (interrupt to stop)\n", url, ca)
		}
	}
	if *asJSON {
		cfg.JSON = stdout
	} else {
		cfg.Text = stdout
	}
	if err := pics.open(); err != nil {
		return fs.usageError("%v", err)
	}
	var (
		mu   sync.Mutex
		sets []picture.Set
	)
	if pics.html != "" {
		// Each session's sets, kept as it ends; its report is not.
		opts = append(opts, serve.OnSessionEnd(func(r *serve.SessionReport) {
			s := pictures.Session(r)
			mu.Lock()
			defer mu.Unlock()
			sets = append(sets, s...)
		}))
	}
	out, err := serve.Run(ctx, cfg, opts...)
	if err != nil {
		pics.discard()
		fmt.Fprintf(stderr, "connaudit serve: %v\n", err)
		return exitUsage
	}
	mu.Lock()
	perr := pics.finish(picture.Page{Title: "connaudit serve", Sets: sets})
	mu.Unlock()
	if perr != nil {
		fmt.Fprintf(stderr, "connaudit serve: writing the picture: %v\n", perr)
		return exitFail
	}
	return serveExit(dashed, out, stderr)
}

// serveExit says the outcome on stderr and returns the exit code.
func serveExit(dashed bool, out *serve.RunOutcome, stderr io.Writer) int {
	for _, r := range out.Failed {
		// Its counts as its text's last line says them, under who it is.
		fmt.Fprintf(stderr, "connaudit serve: %s %s failed (%s):\n", r.Client.Name, r.Session,
			text.Plural(r.Passed+r.Failed+r.NotConfigurable+r.Skipped+r.NotReported, "scenario"))
		counts := r.Counts()
		switch {
		case r.Error != "":
			counts += "; " + r.Error
		case r.Failed == 0 && r.NotReported == 0:
			counts += "; none passed"
		}
		for _, l := range text.Wrap(counts, "    ", "    ", 100) {
			fmt.Fprintln(stderr, l) // a line a Write: stderr escapes a newline within one
		}
	}
	if out.Command != "" {
		for _, l := range text.Wrap("connaudit serve: "+out.Command, "", "    ", 100) {
			fmt.Fprintln(stderr, l)
		}
	}
	if dashed && out.Judged == 0 {
		fmt.Fprintf(stderr, "connaudit serve: the command audited no scenario: nothing was judged\n")
	}
	if out.Output != nil {
		fmt.Fprintf(stderr, "connaudit serve: writing the verdicts: %v\n", out.Output)
	}
	if out.OK(dashed) {
		return exitOK
	}
	return exitFail
}

func compileOrNil(p string) *regexp.Regexp {
	if p == "" {
		return nil
	}
	return regexp.MustCompile(p)
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}
