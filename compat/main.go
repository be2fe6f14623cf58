// Command compat audits widely used Go retry clients, and connaudit's
// package retry, on connaudit's retry contracts (A1…A9, W1…W4, H1, P1: see
// docs/retry.md), side by side, on a loopback fault server.
//
//	go run .          the table: contract × client, observed counts in each cell
//	go run . -json    {"clients":[{"name","version","results":[{"id","pass","observed"}]}]}
//	go run . -md      the table as Markdown, as docs/retry.md shows it
//
// Each client is set as closely to the contracts' policy as it allows
// (clients.go says how). A cell reads client attempts/server requests, then
// the outcome the caller got (a status, or an error's class); w2 is two
// writes committed by the server; ✗ marks a broken contract, n/c one the
// client has no setting for.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"github.com/connaudit/connaudit/audit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the results as JSON")
	asMD := fs.Bool("md", false, "write the table as Markdown")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "compat: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	results, err := auditAll(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "compat: %v\n", err)
		return 1
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Clients []clientResult `json:"clients"`
		}{results})
	case *asMD:
		_, err = io.WriteString(stdout, markdown(results))
	default:
		_, err = io.WriteString(stdout, text(results))
	}
	if err != nil {
		fmt.Fprintf(stderr, "compat: %v\n", err)
		return 1
	}
	return 0
}

// clientResult is one client's results, one per contract.
type clientResult struct {
	Name    string           `json:"name"`
	Version string           `json:"version"`
	Results []contractResult `json:"results"`
}

// contractResult is one contract's verdict for one client.
type contractResult struct {
	ID string `json:"id"`
	// Pass is false for a broken contract and for one the client has no
	// setting for (NotConfigurable says which).
	Pass            bool   `json:"pass"`
	Observed        string `json:"observed"`
	NotConfigurable string `json:"not_configurable,omitempty"`
	// Verdicts are the broken contract's mismatches.
	Verdicts []string `json:"verdicts,omitempty"`
}

// auditAll runs the retry contracts against every client.
func auditAll(ctx context.Context) ([]clientResult, error) {
	scenarios, err := audit.Select(audit.Catalogue(), "^retry/", "")
	if err != nil {
		return nil, err
	}
	var out []clientResult
	for _, c := range clients() {
		r, err := audit.NewRunner(audit.WithRetry(c.name, c.configure))
		if err != nil {
			return nil, err
		}
		rep := r.Run(ctx, scenarios)
		if rep.Skipped > 0 {
			return nil, fmt.Errorf("%s: %d contracts not run: %v", c.name, rep.Skipped, context.Cause(ctx))
		}
		out = append(out, clientResult{Name: c.name, Version: version(c.module), Results: results(rep)})
	}
	return out, nil
}

// results turns a report into one verdict per contract, and P1: every
// contract was followed by /ok on the same pool, with nothing left behind.
func results(rep audit.Report) []contractResult {
	var out []contractResult
	recovered := 0
	var p1 []string
	for _, res := range rep.Results {
		cr := contractResult{ID: res.Contract, Observed: observed(res)}
		if res.NotConfigurable != "" {
			cr.NotConfigurable = res.NotConfigurable
			out = append(out, cr)
			continue
		}
		for _, m := range res.Mismatches {
			if isRecovery(m) {
				p1 = append(p1, m)
				continue
			}
			cr.Verdicts = append(cr.Verdicts, m)
		}
		cr.Pass = len(cr.Verdicts) == 0
		if res.Observed.Recovered && len(res.Observed.Leaks) == 0 {
			recovered++
		}
		out = append(out, cr)
	}
	ran := len(rep.Results) - rep.NotConfigurable
	out = append(out, contractResult{ID: "P1", Pass: len(p1) == 0 && recovered == ran,
		Observed: fmt.Sprintf("%d/%d recovered", recovered, ran), Verdicts: p1})
	return out
}

// isRecovery reports whether a verdict is about the pool after the
// contract (P1) rather than the contract itself.
func isRecovery(m string) bool {
	for _, s := range []string{"not recovered", "leak after recovery", "recovery:"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// observed is a cell: client attempts/server requests, writes, and the
// outcome the caller got.
func observed(res audit.Result) string {
	if res.NotConfigurable != "" {
		return "n/c"
	}
	o := res.Observed
	s := fmt.Sprintf("%d/%d", o.ClientAttempts, o.ServerRequests)
	if res.Expected.Writes != nil {
		s += fmt.Sprintf(" w%d", o.Writes)
	}
	if o.HiddenRetry {
		s += " hidden"
	}
	switch {
	case o.Unbounded:
		return s + " unbounded"
	case o.Class == "ok":
		return fmt.Sprintf("%s %d", s, o.Status)
	case o.Class == "response-header-timeout":
		return s + " header-timeout"
	}
	return s + " " + string(o.Class)
}

// version is the version of module path in this build, or "(this tree)"
// for connaudit itself.
func version(path string) string {
	if path == "" {
		return "(this tree)"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}
