package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"runtime/debug"
	"strings"

	"github.com/connaudit/connaudit/internal/redact"
)

// Exit codes, the same for every command; [exitHelp] says them.
const (
	exitOK          = 0 // all well
	exitFail        = 1 // a failed audit or request, a run cut by its deadline or interrupted
	exitUsage       = 2 // a usage error: a flag, an argument or a file given
	exitUnreachable = 3 // the target did not answer: no request got a response
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"scenarios", "run the fault catalogue against an embedded loopback server", runScenarios},
		{"probe", "audit a host's connection reuse", runProbe},
		{"serve", "serve the fault catalogue to a client of any language", runServe},
		{"proxy", "audit any client against its real upstream, with faults keyed to connections", runProxy},
		{"trace", "trace one request's stages", runTrace},
		{"version", "print the version", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: connaudit <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, exitHelp)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "examples:")
	for _, e := range []string{
		"connaudit scenarios -run 'reset|timeout'",
		"connaudit trace example.com",
		"connaudit probe -n 100 -c 4 https://example.com/",
	} {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'connaudit <command> -h' for a command's flags, exit status and examples.")
}

// exitHelp says the exit codes, for every command's -h.
const exitHelp = `exit status:
  0  all well
  1  a failed audit or request; a run cut by its -deadline or interrupted
     (serve without a command: an interrupt that cut a session short)
  2  a usage error (a flag, an argument, a file named)
  3  the target did not answer: no request got a response (trace, probe)
`

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
	// What the commands write to stderr quotes what the user typed (a
	// path, a pattern, a flag) and what a server sent: none of it may
	// drive the terminal or forge a line.
	stderr = printableWriter{stderr}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		// "connaudit help trace" is "connaudit trace -h".
		args = []string{args[1], "-h"}
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "connaudit: unknown command %q (connaudit -h lists them)\n", args[0])
	return exitUsage
}

// printableWriter escapes what [redact.Printable] escapes in each Write:
// control characters (but tab) and bytes that are not UTF-8, a newline too
// but the one that ends the Write. Each Write must be whole lines of whole
// characters, as each of the CLI's writes to stderr is: a newline inside a
// path or a pattern then cannot start a line of its own.
type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	s, nl := strings.CutSuffix(string(b), "\n")
	s = redact.Printable(s)
	if nl {
		s += "\n"
	}
	if _, err := io.WriteString(p.w, s); err != nil {
		return 0, err
	}
	return len(b), nil
}

// unescaped returns the writer w escapes for, or w: a progress line
// rewrites itself with control sequences of its own.
func unescaped(w io.Writer) io.Writer {
	if p, ok := w.(printableWriter); ok {
		return p.w
	}
	return w
}

// flagSet is a command's flags, with where its help and errors go.
type flagSet struct {
	*flag.FlagSet
	name, synopsis string
	stdout, stderr io.Writer
}

// newFlagSet returns the flags of the command name, whose arguments
// synopsis shows. -h writes the command's help (flags, exit status,
// examples) to stdout; a bad flag is one line on stderr.
func newFlagSet(name string, stdout, stderr io.Writer, synopsis string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are written by parseFlags, help by help
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis, stdout: stdout, stderr: stderr}
}

// help writes the command's help to w.
func (fs *flagSet) help(w io.Writer) {
	h := helpFor(fs.name)
	fmt.Fprintf(w, "usage: %s\n\n", strings.TrimSpace("connaudit "+fs.name+" "+fs.synopsis))
	if h.about != "" {
		fmt.Fprintf(w, "%s\n\n", h.about)
	}
	flags := 0
	fs.VisitAll(func(*flag.Flag) { flags++ })
	if flags > 0 {
		// A command without flags (version) has no empty heading.
		fmt.Fprintln(w, "flags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, h.exits)
	if len(h.examples) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "examples:")
		for _, e := range h.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// usageError writes "connaudit NAME: msg" and where help is on stderr,
// one line, and returns [exitUsage].
func (fs *flagSet) usageError(format string, args ...any) int {
	fmt.Fprintf(fs.stderr, "connaudit %s: %s (connaudit %s -h for help)\n", fs.name, fmt.Sprintf(format, args...), fs.name)
	return exitUsage
}

// parseFlags parses args, flags and arguments in any order (as curl
// does: "trace URL -H …"; after "--", only arguments). It returns the exit
// code to use when the caller must stop (help asked for: 0, written to
// stdout; a bad flag: 2, said on stderr), or -1 to go on; the arguments
// are then fs.Args().
func parseFlags(fs *flagSet, args []string) int {
	err := fs.Parse(interleave(fs.FlagSet, args))
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		fs.help(fs.stdout)
		return exitOK
	}
	return fs.usageError("%v", err)
}

// interleave returns args with the flags first, then "--" and the
// arguments, which may have come between or after the flags: a value
// that follows a flag needing one is that flag's, whatever it looks like.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") || !needsValue(fs, name) {
			continue
		}
		if i+1 == len(args) {
			// The last argument, its value missing: left last, for
			// Parse to say so ("--" would be taken for the value).
			return flags
		}
		i++
		flags = append(flags, args[i])
	}
	if len(positional) == 0 {
		return flags
	}
	return append(append(flags, "--"), positional...)
}

// needsValue reports whether the flag name is defined and takes its value
// from the next argument (as any but a boolean flag does).
func needsValue(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false // an error: Parse says so
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stdout, stderr, "")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return fs.usageError("unexpected argument %q", fs.Arg(0))
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionText(bi))
	return exitOK
}

// versionText says the module's version, the commit it was built from
// (vcs.revision, with its time and whether the tree had changes), and the
// Go that built it: "connaudit (devel), commit 0123456789ab (2026-12-05T16:37:44Z,
// modified), go1.26.8". A build without VCS stamping (go run, go test, a
// tree without its .git) says that the commit is unknown.
func versionText(bi *debug.BuildInfo) string {
	if bi == nil {
		return "connaudit (devel), commit unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	commit := "commit unknown (built without VCS stamping)"
	if rev != "" {
		var notes []string
		if at != "" {
			notes = append(notes, at)
		}
		if modified {
			notes = append(notes, "modified")
		}
		commit = "commit " + rev[:min(12, len(rev))]
		if len(notes) > 0 {
			commit += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	out := "connaudit " + v + ", " + commit
	if bi.GoVersion != "" {
		out += ", " + bi.GoVersion
	}
	return out
}
