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
// The scenarios run 8 at once ([audit.Parallel] changes it; go test's
// -parallel does not bound them), so that the whole catalogue takes about
// as long as its longest scenario, which waits for the transport's longest
// bound. A test of a retry layer alone runs the retry contracts alone:
//
//	func TestRetryLayer(t *testing.T) {
//		audittest.RunContracts(t, audit.WithRetryTransport("ours", configure))
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

// RunContracts runs the retry contracts alone (the scenarios of
// [audit.Catalogue] with a [audit.Scenario].Contract), as [RunScenarios]
// does: the test of a retry layer ([audit.WithRetryTransport],
// [audit.WithRetry]), which the other scenarios do not use.
func RunContracts(t *testing.T, opts ...audit.Option) audit.Report {
	t.Helper()
	var contracts []audit.Scenario
	for _, s := range audit.Catalogue() {
		if s.Contract != "" {
			contracts = append(contracts, s)
		}
	}
	return RunScenarios(t, contracts, opts...)
}

// RunScenarios runs each of scenarios against the client that opts
// configure ([audit.NewRunner]) as a subtest of t named by the scenario
// (TestClient/h2/reset), and returns the report of those run.
//
// The scenarios run 8 at once unless [audit.Parallel] says otherwise, as
// [audit.Runner.Run] runs them, whatever go test's -parallel flag (which
// bounds only how many of the subtests wait for their scenario at once):
// the subtests call t.Parallel, the scenarios that go test -run picks
// start once the test function has returned, each subtest ends with its
// scenario, and the report returned holds no result. With
// audit.Parallel(1) the subtests run one after the other, in the
// scenarios' order, and the report holds every result.
//
// A scenario that fails fails its subtest with its mismatches and fix
// (with -v, its notes and timeline too); one skipped for its protocol, or
// a retry contract the retry layer cannot be configured for, skips its
// subtest with the reason. A finding on the client as a whole (a protocol
// meant that it cannot speak) fails t itself. Options that do not make a
// runner fail t at once.
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
	if r.Parallel() > 1 {
		b := newBatch(t, opts)
		for _, s := range scenarios {
			t.Run(s.Name, func(t *testing.T) {
				t.Helper()
				res := b.add(s)
				t.Parallel()
				b.start()
				judge(t, <-res)
			})
		}
		return rep
	}
	for _, s := range scenarios {
		t.Run(s.Name, func(t *testing.T) {
			// What the subtest logs is at the line that ran the
			// catalogue, the caller's test, not in this package.
			t.Helper()
			res := r.RunOne(t.Context(), s)
			rep.Add(res)
			judge(t, res)
		})
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// A batch runs the scenarios whose subtests go test picked, all at once
// as [audit.Runner.Run] runs them, and hands each result to its subtest
// as it ends. Each picked subtest adds its scenario before it calls
// t.Parallel, and starts the batch after: go test resumes a parallel
// subtest only once the test function has returned, so that by then
// every picked scenario is in the batch.
type batch struct {
	t    *testing.T // the test that ran the catalogue
	opts []audit.Option
	once sync.Once
	wg   sync.WaitGroup

	mu        sync.Mutex
	scenarios []audit.Scenario
	results   []chan audit.Result // one per scenario, buffered: a subtest go test never resumed is not waited for
}

func newBatch(t *testing.T, opts []audit.Option) *batch {
	b := &batch{t: t, opts: opts}
	// The test's cleanups run once every subtest has ended.
	t.Cleanup(b.wg.Wait)
	return b
}

// add puts s in the batch, and returns where its result will be sent.
func (b *batch) add(s audit.Scenario) <-chan audit.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	res := make(chan audit.Result, 1)
	b.scenarios = append(b.scenarios, s)
	b.results = append(b.results, res)
	return res
}

// start runs the batch, once, under the context of the test that ran the
// catalogue.
func (b *batch) start() {
	b.once.Do(func() {
		b.mu.Lock()
		scenarios, results := b.scenarios, b.results
		b.mu.Unlock()
		sent := make([]bool, len(scenarios))
		send := func(res audit.Result) {
			for i, s := range scenarios {
				if !sent[i] && s.Name == res.Name {
					sent[i] = true
					results[i] <- res
					return
				}
			}
		}
		// The results go to their subtests as each ends (OnResult
		// calls never run two at once); those of scenarios never
		// started, when the test's context ended, after the run.
		r, err := audit.NewRunner(append(b.opts, audit.OnResult(send))...)
		if err != nil {
			// NewRunner took these options before the subtests began.
			for i := range scenarios {
				results[i] <- audit.Result{Name: scenarios[i].Name, Mismatches: []string{"setup: " + err.Error()}}
			}
			return
		}
		ctx := b.t.Context()
		b.wg.Go(func() {
			rep := r.Run(ctx, scenarios)
			for i, res := range rep.Results {
				if !sent[i] {
					sent[i] = true
					results[i] <- res
				}
			}
		})
	})
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
