package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/connaudit/connaudit/audit"
)

func runScenarios(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("scenarios", stderr, "[-run PATTERN] [-json] [-junit FILE] [-v] [-list]")
	pattern := fs.String("run", "", "run only the scenarios whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	junit := fs.String("junit", "", "also write the report as JUnit XML to this file")
	verbose := fs.Bool("v", false, "print each scenario's timeline")
	list := fs.Bool("list", false, "list the scenarios and exit")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "connaudit scenarios: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
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
	rep := r.Run(ctx, scenarios)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "connaudit scenarios: interrupted")
	}
	if *asJSON {
		err = audit.WriteJSON(stdout, rep)
	} else {
		err = audit.WriteText(stdout, rep, *verbose)
	}
	if err != nil {
		fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
		return exitFail
	}
	if *junit != "" {
		f, err := os.Create(*junit)
		if err != nil {
			fmt.Fprintf(stderr, "connaudit scenarios: %v\n", err)
			return exitUsage
		}
		werr := audit.WriteJUnit(f, rep)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			fmt.Fprintf(stderr, "connaudit scenarios: writing %s: %v\n", *junit, werr)
			return exitFail
		}
	}
	if !rep.OK() || ctx.Err() != nil {
		return exitFail
	}
	return exitOK
}
