package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/text"
)

func runScenarios(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("scenarios", stdout, stderr, "[-run PATTERN] [-skip PATTERN] [-proto LIST] [-json] [-junit FILE]\n"+
		"                           [-v] [-list] [-parallel N] [-deadline D] [-html F] [-trace-events F]")
	pattern := fs.String("run", "", "run only the scenarios whose name matches this regular expression")
	skip := fs.String("skip", "", "leave out the scenarios whose name matches this regular expression")
	protoList := fs.String("proto", "", "run only the scenarios over these protocols, comma-separated: http1, h2")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	junit := fs.String("junit", "", "also write the report as JUnit XML to this file")
	var pics pictureFlags
	pics.register(fs.FlagSet, true)
	verbose := fs.Bool("v", false, "also print every scenario's fault, reference bound, notes and timeline")
	list := fs.Bool("list", false, "list the scenarios and exit")
	parallel := fs.Int("parallel", 8, "scenarios run at once, each judged alone; 1: one at a time, in order")
	deadline := fs.Duration("deadline", 5*time.Minute, "bound on the whole run; the scenarios not started by then are skipped")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "connaudit scenarios: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *parallel < 1 || *parallel > 64 {
		fmt.Fprintf(stderr, "connaudit scenarios: -parallel %d: want 1 to 64\n", *parallel)
		return exitUsage
	}
	if *deadline <= 0 {
		fmt.Fprintf(stderr, "connaudit scenarios: -deadline %v must be positive\n", *deadline)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *deadline)
	defer cancel()
	var protos []audit.Proto
	if *protoList != "" {
		for _, p := range strings.Split(*protoList, ",") {
			protos = append(protos, audit.Proto(strings.TrimSpace(p)))
		}
	}
	scenarios, err := audit.Select(audit.Catalogue(), *pattern, *skip, protos...)
	if err != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
		return exitUsage
	}
	if *list {
		writeList(stdout, scenarios)
		return exitOK
	}
	r, err := audit.NewRunner(audit.Parallel(*parallel))
	if err != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
		return exitUsage
	}
	// The JUnit file is opened now, so that a path that cannot be written
	// fails before the run, and written after it.
	var junitFile *outputFile
	if *junit != "" {
		if junitFile, err = openOutput(*junit); err != nil {
			fmt.Fprintf(stderr, "connaudit scenarios: -junit: %v\n", err)
			return exitUsage
		}
	}
	if err := pics.open(); err != nil {
		if junitFile != nil {
			junitFile.discard()
		}
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
		return exitUsage
	}
	rep := r.Run(ctx, scenarios)
	if perr := pics.finish(picture.Page{Title: "connaudit scenarios", Sets: pictures.Scenarios(rep)}); perr != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: writing the picture: %v\n", perr)
		return exitFail
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: stopped after %d of %d scenarios: %v\n", rep.Passed+rep.Failed, len(scenarios), context.Cause(ctx))
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout, *verbose)
	}
	if err != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
	}
	if junitFile != nil {
		if jerr := junitFile.write(func(w io.Writer) error { return rep.WriteJUnit(w) }); jerr != nil {
			fmt.Fprintf(stderr, "connaudit scenarios: writing %s: %v\n", *junit, jerr)
			return exitFail
		}
	}
	if err != nil {
		return exitFail
	}
	if ctx.Err() != nil {
		return exitFail // said above
	}
	if !rep.OK() {
		fmt.Fprintf(stderr, "connaudit scenarios: %d of %d scenarios failed, %d skipped\n", rep.Failed, len(rep.Results), rep.Skipped)
		return exitFail
	}
	return exitOK
}

// listWidth is the width the scenario list fits.
const listWidth = 100

// writeList writes one entry per scenario: its name and protocol, then
// what the server does and the catalogue's reference bound, wrapped under
// them to fit listWidth.
func writeList(w io.Writer, scenarios []audit.Scenario) {
	nameW := len("SCENARIO")
	for _, s := range scenarios {
		nameW = max(nameW, len(s.Name))
	}
	indent := strings.Repeat(" ", nameW+2+5+2)
	fmt.Fprintf(w, "%-*s  %-5s  %s\n", nameW, "SCENARIO", "PROTO", "FAULT; REFERENCE BOUND")
	for _, s := range scenarios {
		what := s.Fault
		if s.Bound != "" && s.Bound != "-" {
			what += "; " + s.Bound
		}
		lines := text.Wrap(what, "", "", listWidth-len(indent))
		fmt.Fprintf(w, "%-*s  %-5s  %s\n", nameW, s.Name, s.Proto, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
}
