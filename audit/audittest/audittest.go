// Package audittest runs the fault catalogue of package audit as go test
// subtests: one per scenario, named by the scenario, as
// testing/fstest.TestFS runs a file system's checks. go test -run picks
// scenarios (-run 'TestClient/^h2/', -run 'TestClient/connect-hang$'),
// -v lists a PASS, FAIL or SKIP for each, and a failed subtest prints its
// mismatches and the setting that fixes it.
//
//	func TestClient(t *testing.T) {
//		audittest.Run(t, audit.WithTransport("ours", newTransport, pool.BodyIdleTimeout(2*time.Second)))
//	}
//
// It links package testing; package audit does not import it, so a program
// that uses audit alone (a CLI, a service's self-check) does not.
package audittest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/internal/redact"
)

// Run runs the whole catalogue ([audit.Catalogue]) against the client that
// opts configure, as [RunScenarios] does.
func Run(t *testing.T, opts ...audit.Option) audit.Report {
	t.Helper()
	return RunScenarios(t, audit.Catalogue(), opts...)
}

// RunScenarios runs each of scenarios against the client that opts
// configure ([audit.NewRunner]) as a subtest of t named by the scenario
// (TestClient/h2/reset), and returns the report of those run. With
// audit.Parallel(n), n > 1, the subtests call t.Parallel: go test runs
// them once the test function has returned (bounded by its -parallel
// flag), and the report returned is then empty. A scenario
// that fails fails its subtest with its mismatches and fix (with -v, its
// notes and timeline too); one skipped for its protocol, or a retry
// contract the retry layer cannot be configured for, skips its subtest
// with the reason. A finding on the client as a whole (a protocol meant
// that it cannot speak) fails t itself. Options that do not make a runner
// fail t at once.
func RunScenarios(t *testing.T, scenarios []audit.Scenario, opts ...audit.Option) audit.Report {
	t.Helper()
	r, err := audit.NewRunner(opts...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep := r.NewReport()
	rep.Findings = r.Findings(scenarios)
	for _, f := range rep.Findings {
		problem, fix, _ := strings.Cut(f, "; fix: ")
		t.Errorf("finding: %s\n    fix: %s", redact.Printable(problem), redact.Printable(fix))
	}
	parallel := r.Parallel() > 1
	var mu sync.Mutex
	for _, s := range scenarios {
		t.Run(s.Name, func(t *testing.T) {
			// What the subtest logs is at the line that ran the
			// catalogue, the caller's test, not in this package.
			t.Helper()
			if parallel {
				t.Parallel()
			}
			res := r.RunOne(t.Context(), s)
			mu.Lock()
			rep.Add(res)
			mu.Unlock()
			judge(t, res)
		})
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// judge reports one result as its subtest's outcome.
func judge(t *testing.T, res audit.Result) {
	t.Helper()
	switch {
	case res.Skipped != "":
		msg := res.Skipped
		if res.Fix != "" {
			msg += "; fix: " + res.Fix
		}
		t.Skip(redact.Printable(msg))
	case res.NotConfigurable != "":
		t.Skip(redact.Printable("not configurable: " + res.NotConfigurable))
	case res.Pass:
		if testing.Verbose() {
			for _, n := range once(res.Observed.Notes) {
				t.Log(redact.Printable(n))
			}
		}
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: fault: %s\n", redact.Printable(res.Name), redact.Printable(res.Fault))
	for _, m := range res.Mismatches {
		fmt.Fprintf(&b, "  - %s\n", redact.Printable(m))
	}
	if res.Fix != "" {
		fmt.Fprintf(&b, "  fix: %s\n", redact.Printable(res.Fix))
	}
	if testing.Verbose() {
		for _, n := range once(res.Observed.Notes) {
			fmt.Fprintf(&b, "  note: %s\n", redact.Printable(n))
		}
		if tl := res.Observed.Timeline; tl != nil {
			b.WriteString("  timeline:\n")
			var tb strings.Builder
			tl.WriteText(&tb, true)
			for _, l := range strings.Split(strings.TrimRight(tb.String(), "\n"), "\n") {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	t.Error(strings.TrimRight(b.String(), "\n"))
}

// once returns notes without repeats, in their order.
func once(notes []string) []string {
	var out []string
	for _, n := range notes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
