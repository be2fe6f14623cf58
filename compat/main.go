// Command compat audits widely used Go retry libraries, and connaudit's
// package retry, on connaudit's retry contracts (A1…A10, W1…W4, H1, H2,
// P1: see docs/retry.md), side by side, on a loopback fault server.
//
//	go run .          the table, then what each broken contract observed
//	go run . -json    {"clients":[{"name","version","row","how","results":[{"id","pass","observed",…}]}]}
//	go run . -md      the table and its notes as Markdown, as docs/retry.md shows them
//
// Every library has two rows. "defaults" is what its documented starting
// point does (NewClient(), New(), the README's first call), with its waits
// between attempts shortened a hundredfold and nothing else changed; it
// does not read the contract's policy. "configured" is the library set for
// each contract's policy with its own documented options, named in the
// notes (clients.go says how); a contract it cannot hold there says why.
// In either row every attempt goes through the client the audit gives. A
// cell is the number of requests the server saw, after ✓ for a contract
// held and ✗ for one broken; ∞ is a call still going at the audit's guard
// deadline, n/c a contract the library has no setting for.
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
		_, err = io.WriteString(stdout, tableText(results))
	}
	if err != nil {
		fmt.Fprintf(stderr, "compat: %v\n", err)
		return 1
	}
	return 0
}

// clientResult is one row: a library at its defaults or configured for
// the contracts, with one result per contract.
type clientResult struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Row is "defaults" or "configured"; How names the options.
	Row     string           `json:"row"`
	How     string           `json:"how"`
	Results []contractResult `json:"results"`
}

// contractResult is one contract's verdict for one row.
type contractResult struct {
	ID string `json:"id"`
	// Pass is false for a broken contract and for one the library has no
	// setting for (NotConfigurable says which).
	Pass            bool   `json:"pass"`
	Observed        string `json:"observed"`
	NotConfigurable string `json:"not_configurable,omitempty"`
	// Unbounded is set when the call had not ended at the audit's guard
	// deadline.
	Unbounded bool `json:"unbounded,omitempty"`
	// Requests is the number of requests the server saw.
	Requests int64 `json:"requests"`
	// Verdicts are the broken contract's mismatches; Error is the error
	// the caller got, if any.
	Verdicts []string `json:"verdicts,omitempty"`
	Error    string   `json:"error,omitempty"`
	// Unclosed counts the responses of the call that nobody closed.
	Unclosed int `json:"unclosed,omitempty"`
	// Why, in a configured row, says why the library cannot hold the
	// contract: what its source lacks.
	Why string `json:"why,omitempty"`
}

// auditAll runs the retry contracts against every library, in its two
// rows.
func auditAll(ctx context.Context) ([]clientResult, error) {
	scenarios, err := audit.Select(audit.Catalogue(), "^retry/", contractsSkip)
	if err != nil {
		return nil, err
	}
	var out []clientResult
	for _, c := range clients() {
		for _, row := range []struct {
			name string
			l    layer
		}{{rowDefaults, c.defaults}, {rowConfigured, c.configured}} {
			opts := []audit.Option{audit.WithRetry(c.name, row.l.configure), audit.Parallel(8)}
			if row.name == rowDefaults {
				opts = append(opts, audit.RetryAtDefaults())
			}
			if row.l.guard > 0 {
				opts = append(opts, audit.GuardDeadline(row.l.guard))
			}
			r, err := audit.NewRunner(opts...)
			if err != nil {
				return nil, err
			}
			rep := r.Run(ctx, scenarios)
			if rep.Skipped > 0 {
				return nil, fmt.Errorf("%s (%s): %d contracts not run: %v", c.name, row.name, rep.Skipped, context.Cause(ctx))
			}
			res := results(rep)
			if row.name == rowConfigured {
				for i := range res {
					if !res[i].Pass {
						res[i].Why = whyNot[c.name][res[i].ID]
					}
				}
			}
			out = append(out, clientResult{Name: c.name, Version: version(c.module), Row: row.name, How: row.l.how, Results: res})
		}
	}
	return out, nil
}

// results turns a report into one verdict per contract, and P1: every
// contract was followed by /ok on the same pool, with nothing left behind,
// and the caller's cancel (P1's own scenarios) ended the call.
func results(rep audit.Report) []contractResult {
	var out []contractResult
	recovered, ran := 0, 0
	var p1 []string
	for _, res := range rep.Results {
		if res.NotConfigurable == "" {
			ran++
			if res.Observed.Recovered && len(res.Observed.Leaks) == 0 {
				recovered++
			}
		}
		cr := contractResult{ID: res.Contract, Observed: observed(res), Unbounded: res.Observed.Unbounded,
			Requests: res.Observed.ServerRequests, Error: res.Observed.Error}
		if res.NotConfigurable != "" {
			cr.NotConfigurable = res.NotConfigurable
		}
		for _, m := range res.Mismatches {
			if strings.Contains(m, "leak after recovery: open body:") {
				cr.Unclosed++
			}
			if isRecovery(m) || res.Contract == "P1" {
				p1 = append(p1, m)
				continue
			}
			cr.Verdicts = append(cr.Verdicts, m)
		}
		if res.Contract == "P1" {
			continue
		}
		cr.Pass = len(cr.Verdicts) == 0 && cr.NotConfigurable == ""
		out = append(out, cr)
	}
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
