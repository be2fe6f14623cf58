package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/connaudit/connaudit/serve"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", stdout, stderr, "[-addr HOST:PORT] [-ca FILE] [-run P] [-skip P] [-source-numbers] [-json]\n"+
		"                       [-junit FILE] [-deadline D] [-- CMD ARGS…]")
	addr := fs.String("addr", "127.0.0.1:0", "the control API's address (CONNAUDIT_URL); faults stay on 127.0.0.1")
	caPath := fs.String("ca", "", "write the HTTPS listeners' CA certificate here (default: a temporary file)")
	run := fs.String("run", "", "offer only the scenarios whose name matches this regular expression")
	skip := fs.String("skip", "", "leave out the scenarios whose name matches this regular expression")
	sourceNumbers := fs.Bool("source-numbers", false, "serve A6, A8 and A9 at the source's own numbers, not scaled down")
	asJSON := fs.Bool("json", false, "write the verdicts as JSON")
	junit := fs.String("junit", "", "also write the verdicts as JUnit XML to this file")
	deadline := fs.Duration("deadline", 20*time.Minute, "bound on CMD: it is interrupted then")
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
	opts := []serve.Option{serve.Addr(*addr)}
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
		fmt.Fprintf(stderr, "connaudit serve: warning: the control API listens on %s, not loopback: anyone who reaches it can open sessions\n", *addr)
		opts = append(opts, serve.AllowRemote())
	}
	var junitFile *outputFile
	if *junit != "" {
		var err error
		if junitFile, err = openOutput(*junit); err != nil {
			return fs.usageError("-junit: %v", err)
		}
	}
	if dashed {
		if _, err := exec.LookPath(cmdArgs[0]); err != nil {
			return fs.usageError("%v", err)
		}
	}
	srv, err := serve.New(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "connaudit serve: %v\n", err)
		return exitUsage
	}
	defer srv.Close()
	ca := *caPath
	if ca == "" {
		dir, err := os.MkdirTemp("", "connaudit-serve-")
		if err != nil {
			fmt.Fprintf(stderr, "connaudit serve: %v\n", err)
			return exitFail
		}
		defer os.RemoveAll(dir)
		ca = filepath.Join(dir, "ca.pem")
	}
	if err := os.WriteFile(ca, srv.CA(), 0o644); err != nil {
		fmt.Fprintf(stderr, "connaudit serve: writing the CA: %v\n", err)
		return exitUsage
	}

	var reports []*serve.SessionReport
	write := func(rs []*serve.SessionReport) {
		if *asJSON {
			return
		}
		for _, r := range rs {
			r.WriteText(stdout)
			fmt.Fprintln(stdout)
		}
	}
	cmdFailed := ""
	if dashed {
		cmdFailed = runKit(ctx, *deadline, cmdArgs, srv.URL(), ca)
		srv.Close() // ends the sessions CMD left open
		reports, _ = srv.Ended()
		write(reports)
	} else {
		fmt.Fprintf(stderr, "connaudit serve: CONNAUDIT_URL=%s CONNAUDIT_CA=%s (interrupt to stop)\n", srv.URL(), ca)
		for {
			rs, next := srv.Ended()
			write(rs)
			reports = append(reports, rs...)
			select {
			case <-next:
				continue
			case <-ctx.Done():
			}
			break
		}
		srv.Close()
		rs, _ := srv.Ended()
		write(rs)
		reports = append(reports, rs...)
	}
	if *asJSON {
		if err := serve.WriteJSON(stdout, reports); err != nil {
			fmt.Fprintf(stderr, "connaudit serve: %v\n", err)
		}
	}
	if junitFile != nil {
		if err := junitFile.write(func(w io.Writer) error { return serve.WriteJUnit(w, reports) }); err != nil {
			fmt.Fprintf(stderr, "connaudit serve: writing %s: %v\n", *junit, err)
			return exitFail
		}
	}
	return serveExit(dashed, cmdFailed, reports, stderr)
}

// serveExit says the outcome on stderr and returns the exit code.
func serveExit(dashed bool, cmdFailed string, reports []*serve.SessionReport, stderr io.Writer) int {
	code := exitOK
	judged := 0
	for _, r := range reports {
		judged += r.Passed + r.Failed
		if !r.OK {
			code = exitFail
			fmt.Fprintf(stderr, "connaudit serve: %s %s: %d of %d scenarios failed, %d not reported\n",
				r.Client.Name, r.Session, r.Failed, len(r.Results), r.NotReported)
		}
	}
	if cmdFailed != "" {
		fmt.Fprintf(stderr, "connaudit serve: %s\n", cmdFailed)
		code = exitFail
	}
	if dashed && judged == 0 {
		fmt.Fprintf(stderr, "connaudit serve: the command audited no scenario: nothing was judged\n")
		code = exitFail
	}
	return code
}

// runKit runs the kit's command with the server's address and CA in its
// environment, its output to ours, and says how it failed ("" if not).
func runKit(ctx context.Context, deadline time.Duration, args []string, url, ca string) string {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "CONNAUDIT_URL="+url, "CONNAUDIT_CA="+ca)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ""
	case ctx.Err() != nil:
		return fmt.Sprintf("%s was stopped: %v", args[0], context.Cause(ctx))
	case errors.As(err, &ee):
		return fmt.Sprintf("%s failed: %v", args[0], ee)
	}
	return fmt.Sprintf("%s: %v", args[0], err)
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
