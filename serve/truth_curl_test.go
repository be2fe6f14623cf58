package serve

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestTruthCurlRetryBudget pins what curl's retry options do against a
// raw server that answers 503 every time, for the verdict on A8
// (retry/total-budget): --max-time bounds each attempt, not the delays
// between them; --retry-max-time is checked before each retry's delay,
// the delay not counted; when the retries stop curl hands back the last
// 503 (exit 0), never a timeout; --retry-delay takes whole seconds. So no
// curl option ends a call with a timeout when its total budget runs out.
func TestTruthCurlRetryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs curl for seconds")
	}
	beside(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	w := []string{"-s", "-o", "/dev/null", "-w", "%{http_code} %{exitcode}\n"}
	cases := []struct {
		name     string
		args     []string
		caller   string
		requests int
	}{
		// The kit's configuration for A8 before it said not configurable:
		// 2 requests a second apart, then the last 503.
		{"the kit's A8", []string{"--max-time", "0.300", "--retry", "2", "--retry-delay", "1", "--retry-max-time", "1"}, "status 503", 2},
		// 2 s of delays under a --max-time of 1.5 s: every retry is made.
		{"max-time per attempt", []string{"--max-time", "1.5", "--retry", "2", "--retry-delay", "1"}, "status 503", 3},
		// A budget of 3 s: the retry decided at 2 s sleeps 2 s more.
		{"delay not counted", []string{"--retry", "3", "--retry-delay", "2", "--retry-max-time", "3"}, "status 503", 3},
	}
	for _, c := range cases {
		s := &truthServer{fault: func(int, int) string { return "503" }}
		m := s.run(t, "curl", "503", func(url, _ string) *exec.Cmd {
			return exec.Command("curl", append(append(slices.Clone(w), c.args...), url)...)
		})
		for i, l := range m.caller {
			m.caller[i] = curlCode(l)
		}
		if os.Getenv("CONNAUDIT_MEASURE") != "" {
			t.Logf("curl %-22s %s", c.name, m)
		}
		if len(m.caller) != 1 || m.caller[0] != c.caller || m.requests != c.requests {
			t.Errorf("curl %v: %s; pinned %s after %d requests", c.args, m, c.caller, c.requests)
		}
	}
	// Fractions of a second are refused (curl 7.88: "expected a proper
	// numerical parameter", exit 2).
	for _, opt := range []string{"--retry-delay", "--retry-max-time"} {
		err := exec.Command("curl", "-s", "--retry", "1", opt, "0.3", "http://127.0.0.1:1/").Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("curl %s 0.3: %v, pinned exit 2 (whole seconds)", opt, err)
		}
	}
}
