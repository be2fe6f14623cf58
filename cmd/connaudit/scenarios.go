package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/connaudit/connaudit/audit"
)

func runScenarios(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("scenarios", stdout, stderr, "[-run PATTERN] [-json] [-junit FILE] [-v] [-list] [-deadline D]")
	pattern := fs.String("run", "", "run only the scenarios whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	junit := fs.String("junit", "", "also write the report as JUnit XML to this file")
	verbose := fs.Bool("v", false, "print each scenario's timeline")
	list := fs.Bool("list", false, "list the scenarios and exit")
	deadline := fs.Duration("deadline", 5*time.Minute, "bound on the whole run; scenarios not started by then are reported skipped")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "connaudit scenarios: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *deadline <= 0 {
		fmt.Fprintf(stderr, "connaudit scenarios: -deadline %v must be positive\n", *deadline)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *deadline)
	defer cancel()
	scenarios, err := audit.Select(audit.Catalogue(), *pattern)
	if err != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
		return exitUsage
	}
	if *list {
		for _, s := range scenarios {
			fmt.Fprintf(stdout, "%-30s %-5s %s; bound: %s\n", s.Name, s.Proto, s.Fault, s.Bound)
		}
		return exitOK
	}
	r, err := audit.NewRunner()
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
	rep := r.Run(ctx, scenarios)
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
