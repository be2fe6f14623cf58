package serve

import (
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestKitVerdictsTrue runs the curl and requests examples on the scenarios
// whose verdicts must say what each client really does: curl cannot end a
// call when its retry budget runs out (retry/total-budget: not
// configurable, TestTruthCurlRetryBudget measures why); curl keeps an
// HTTP/2 connection gone dark open past the settle and sends /ok on it
// (h2/go-dark: failed, the fate open, the fix in curl's terms); requests
// passes no pool_timeout to urllib3 (pool-acquire-timeout: not
// configurable). Each kit prints the line of its session's counts.
func TestKitVerdictsTrue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients")
	}
	beside(t)
	r := root(t)
	col := &collector{}
	srv, err := New(OnSessionEnd(col.add), Select(regexp.MustCompile(`^(retry/total-budget|h2/go-dark|pool-acquire-timeout)$`), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Every command first: one may skip the test (a kit not installed),
	// which must happen before any client runs.
	argvs := map[string][]string{}
	for _, name := range []string{"curl", "requests"} {
		argvs[name] = exampleOf(t, name).cmd(t, r)
	}
	for name, argv := range argvs {
		wg.Go(func() {
			o := runExample(t.Context(), t, srv, argv)
			mu.Lock()
			out[name] = o
			mu.Unlock()
		})
	}
	wg.Wait()
	srv.Close()
	reports := col.all()

	curl := sessionOf(t, reports, "curl")
	if a8 := resultOf(t, curl, "retry/total-budget"); !strings.Contains(a8.NotConfigurable, "--retry-max-time is checked before each retry's delay") {
		t.Errorf("curl retry/total-budget: pass %v, not configurable %q, %q, fix %q", a8.Pass, a8.NotConfigurable, a8.Mismatches, a8.Fix)
	}
	dark := resultOf(t, curl, "h2/go-dark")
	if dark.Pass || dark.Fate != "open" || !strings.Contains(dark.Fix, "send what follows a timeout in a new curl invocation") || strings.Contains(dark.Fix, "SendPingTimeout") {
		t.Errorf("curl h2/go-dark: pass %v, fate %q, %q, fix %q", dark.Pass, dark.Fate, dark.Mismatches, dark.Fix)
	}
	if pool := resultOf(t, curl, "pool-acquire-timeout"); pool.NotConfigurable == "" {
		t.Errorf("curl pool-acquire-timeout: %+v", pool)
	}
	req := sessionOf(t, reports, "requests")
	if pool := resultOf(t, req, "pool-acquire-timeout"); !strings.Contains(pool.NotConfigurable, "requests passes no pool_timeout to urllib3") {
		t.Errorf("requests pool-acquire-timeout: pass %v, not configurable %q, %q, fix %q", pool.Pass, pool.NotConfigurable, pool.Mismatches, pool.Fix)
	}
	for name, want := range map[string]string{
		"curl":     "connaudit kit: curl: 0 passed, 1 failed, 2 not configurable\n",
		"requests": "connaudit kit: requests: 0 passed, 0 failed, 2 not configurable\n",
	} {
		if !strings.Contains(out[name], want) {
			t.Errorf("%s printed %q, want the line %q", name, out[name], want)
		}
	}
}
