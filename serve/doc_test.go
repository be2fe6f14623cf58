package serve

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

const (
	listStart = "<!-- serve scenarios: begin -->\n"
	listEnd   = "<!-- serve scenarios: end -->\n"
)

// scenarioList is the served scenarios as docs/serve.md lists them: each
// with its steps, the policy's settings that are not 0, and what the
// caller must be given.
func scenarioList(specs []*spec) string {
	var b strings.Builder
	b.WriteString("| scenario | steps | policy (ms; 0s left out) | caller gets |\n|---|---|---|---|\n")
	for _, sp := range specs {
		p := sp.policy
		var set []string
		num := func(name string, v float64) {
			if v != 0 {
				set = append(set, fmt.Sprintf("%s %g", name, v))
			}
		}
		num("attempt", p.AttemptTimeoutMS)
		num("total", p.TotalTimeoutMS)
		num("retries", float64(p.MaxRetries))
		num("delay", p.DelayMS)
		num("read", p.ReadTimeoutMS)
		num("connect", p.ConnectTimeoutMS)
		num("tls", p.TLSTimeoutMS)
		num("pool", float64(p.PoolMaxPerHost))
		num("acquire", p.PoolAcquireTimeoutMS)
		if len(p.RetryStatuses) > 0 {
			set = append(set, fmt.Sprintf("statuses %v", p.RetryStatuses))
		}
		if p.RetryAnyMethod {
			set = append(set, "any method")
		}
		if p.RetryWithIdempotencyKey {
			set = append(set, "keyed methods")
		}
		req := ""
		if sp.request.Method != "GET" {
			req = " " + sp.request.Method
		}
		for k, v := range sp.request.Headers {
			req += fmt.Sprintf(" %s: %s", k, v)
		}
		if sp.request.KeyPerAttempt != "" {
			req += " key per attempt"
		}
		num("ping after", p.SendPingTimeoutMS)
		num("ping timeout", p.PingTimeoutMS)
		name := sp.Name
		if sp.Contract != "" {
			name = sp.Contract + " " + name
		}
		steps := string(sp.Steps)
		if sp.WarmAside {
			steps += " (warm aside)"
		}
		if sp.Warm > 1 {
			steps += fmt.Sprintf(" (%d warm-ups)", sp.Warm)
		}
		if sp.Close != "" {
			steps += " (" + sp.Close + ")"
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s | %s |\n", name, steps, req, strings.Join(set, ", "), expectText(sp.caller))
	}
	return b.String()
}

// TestScenarioList: the list of scenarios in docs/serve.md is the
// server's (go test ./serve -run TestScenarioList -update rewrites it).
func TestScenarioList(t *testing.T) {
	checkDoc(t, listStart, listEnd, scenarioList(catalogue(false)))
}

func checkDoc(t *testing.T, start, end, want string) {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(start)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", docPath, start, end)
	}
	if string(doc[i+len(start):j]) == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(start)]...), want...), doc[j:]...)
		if err := os.WriteFile(docPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale (go test ./serve -run %s -update); this run gives:\n%s", docPath, t.Name(), want)
}
