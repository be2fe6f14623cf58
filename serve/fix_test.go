package serve

import (
	"strings"
	"testing"
)

// TestIdleFixDirection: every client's fix for an idle timeout as long as
// the servers' keep-alive timeout, or longer, says to drop an idle
// connection before the server would: below or shorter than that timeout,
// never "longer than" it or requests "further apart".
func TestIdleFixDirection(t *testing.T) {
	all := map[string]fixes{"(generic)": generic}
	for name, f := range clientFixes {
		all[name] = f
	}
	for name, f := range all {
		s := f.idle
		if s == "" {
			continue // the generic one is used
		}
		if !strings.Contains(s, "below") && !strings.Contains(s, "shorter than") {
			t.Errorf("%s: %q says no bound below the servers' keep-alive timeout", name, s)
		}
		for _, wrong := range []string{"longer than", "further apart", "after an idle period"} {
			if strings.Contains(s, wrong) {
				t.Errorf("%s: %q says %q: the wrong way", name, s, wrong)
			}
		}
	}
}

// TestCurlBudgetFix: the fix for a curl call the total budget did not end
// says what curl's options do (TestTruthCurlRetryBudget measures it), not
// "add --max-time", which bounds each attempt and was already set.
func TestCurlBudgetFix(t *testing.T) {
	var a8 *spec
	for _, sp := range catalogue(false) {
		if sp.Name == "retry/total-budget" {
			a8 = sp
		}
	}
	if a8 == nil {
		t.Fatal("no retry/total-budget in the catalogue")
	}
	for _, fails := range [][]failure{{failBudget}, {failUnbounded}, {failOutcome, failBudget}} {
		got := fixFor("curl", a8, fails)
		if got != curlBudget || strings.Contains(got, "add --max-time") {
			t.Errorf("curl, %v: fix %q", fails, got)
		}
	}
}
