package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"runtime/debug"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitUnreachable: no request to the target succeeded.
	exitUnreachable = 3
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"scenarios", "run the fault catalogue against an embedded loopback server", runScenarios},
		{"probe", "audit a host's connection reuse", runProbe},
		{"trace", "trace one request's stages", runTrace},
		{"version", "print the version", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: connaudit <command> [flags] [args]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'connaudit <command> -h' for a command's flags.")
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// net/http logs to the standard logger when a server sends bytes on
	// an idle connection ("Unsolicited response …", as a protocol that
	// speaks first does, or a second response to one request), quoting
	// those bytes: not on our stderr, whose error is one line, and never
	// bytes a server may have echoed (a cookie, the request's query).
	log.SetOutput(io.Discard)
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "connaudit: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// newFlagSet returns a flag set that reports errors to stderr and does not
// exit.
func newFlagSet(name string, stderr io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: connaudit %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns the exit code to use when the caller
// must stop (help asked for: 0; bad flags: 2), or -1 to go on.
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	return -1
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr, "")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "connaudit version: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "connaudit %s\n", v)
	return exitOK
}
