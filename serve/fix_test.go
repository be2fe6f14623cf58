package serve

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kitTerms reads every terms declaration the kits hold (kits/…/NAME.terms.json,
// outside installs and builds), by client name.
func kitTerms(t *testing.T) map[string]map[string]string {
	t.Helper()
	all := map[string]map[string]string{}
	err := filepath.WalkDir(filepath.Join("..", "kits"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "target" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		name, ok := strings.CutSuffix(d.Name(), ".terms.json")
		if d.IsDir() || !ok {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if _, dup := all[name]; dup {
			t.Errorf("%s: a second declaration of %s", path, name)
		}
		all[name] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"curl", "requests", "httpx", "fetch", "axios", "webclient", "restclient"} {
		if all[c] == nil {
			t.Fatalf("no kits/…/%s.terms.json among %d", c, len(all))
		}
	}
	return all
}

// TestKitTermsValid: every kit's declaration is one the server accepts at
// a session's open, and says something of each bound and retry rule (a
// term left out would be said in the policy's terms).
func TestKitTermsValid(t *testing.T) {
	for name, decl := range kitTerms(t) {
		terms, err := termsOf(decl)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, must := range []term{tReadTimeout, tAttemptTimeout, tConnectTimeout, tTotalTimeout, tRetryStatuses, tStale} {
			if terms[must] == "" {
				t.Errorf("%s declares no %s", name, must)
			}
		}
	}
}

// TestTermsOf: a declaration is refused, saying why, for an unknown term,
// an empty text or one too long; a term is said as declared, one left out
// in the policy's terms, and an empty declaration is none.
func TestTermsOf(t *testing.T) {
	for _, c := range []struct {
		decl map[string]string
		says string
	}{
		{map[string]string{"read": "x"}, `client.terms: "read" is not a term (the terms: attempt_timeout,`},
		{map[string]string{"stale": "x", "Stale": "y"}, `"Stale" is not a term`},
		{map[string]string{"idle_timeout": ""}, "client.terms.idle_timeout is empty"},
		{map[string]string{"cancel": strings.Repeat("é", 501)}, "client.terms.cancel is 1002 bytes, longer than 1000"},
		{map[string]string{strings.Repeat("k", 5000): "x"}, `"` + strings.Repeat("k", 64) + `…" is not a term`},
	} {
		if _, err := termsOf(c.decl); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%.80v: %v; want an error saying %q", c.decl, err, c.says)
		}
	}
	if terms, err := termsOf(map[string]string{}); err != nil || terms != nil {
		t.Errorf("an empty declaration: %v, %v", terms, err)
	}
	terms, err := termsOf(map[string]string{"retry_statuses": "mine \x1b[31m", "stale": strings.Repeat("s", maxTerm)})
	if err != nil {
		t.Fatal(err)
	}
	if got := say(terms, tRetryStatuses); got != `mine \x1b[31m` {
		t.Errorf("a declared term, escaped: %q", got)
	}
	if got := say(terms, tRetryErrors); got != generic[tRetryErrors] {
		t.Errorf("a term left out: %q", got)
	}
	if n := len(strings.Split(termNames(), ", ")); n != 22 {
		t.Errorf("%d terms: %s", n, termNames())
	}
}

// TestEveryFailureHasATerm: each kind of failure but those said by the
// scenario's bound is fixed by a term, and every term but the health
// check has a text in the policy's terms.
func TestEveryFailureHasATerm(t *testing.T) {
	for _, f := range []failure{failRetriedStatus, failRetriedError, failNotRetried, failTooMany, failBudget, failPost,
		failKey, failLastStatus, failCancel, failRecovery, failHidden, failFate, failPool, failStale, failIdle} {
		if _, ok := termOf[f]; !ok {
			t.Errorf("failure %s has no term", f)
		}
	}
	for tm, s := range generic {
		if s == "" && tm != tHealthCheck {
			t.Errorf("term %s has no text in the policy's terms", tm)
		}
	}
}

// TestIdleFixDirection: every kit's fix for an idle timeout as long as
// the servers' keep-alive timeout, or longer, says to drop an idle
// connection before the server would: below or shorter than that timeout,
// never "longer than" it or requests "further apart".
func TestIdleFixDirection(t *testing.T) {
	all := map[string]string{"(generic)": generic[tIdleTimeout]}
	for name, decl := range kitTerms(t) {
		if s, ok := decl[string(tIdleTimeout)]; ok {
			all[name] = s
		}
	}
	if len(all) < 8 {
		t.Fatalf("%d idle fixes: %v", len(all), slices.Collect(func(yield func(string) bool) {
			for k := range all {
				if !yield(k) {
					return
				}
			}
		}))
	}
	for name, s := range all {
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
	curl, err := termsOf(kitTerms(t)["curl"])
	if err != nil {
		t.Fatal(err)
	}
	for _, fails := range [][]failure{{failBudget}, {failUnbounded}, {failOutcome, failBudget}} {
		got := fixFor(curl, a8, fails)
		if !strings.Contains(got, "--retry-max-time (whole seconds) is checked before each retry's delay") ||
			strings.Contains(got, "add --max-time") || got != curl[tTotalTimeout] || got != curl[tRetryBudget] {
			t.Errorf("curl, %v: fix %q", fails, got)
		}
	}
}
