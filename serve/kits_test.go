package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// example is a kit's example client and the command that runs it.
type example struct {
	name string
	cmd  func(t *testing.T, root string) []string
}

var examples = []example{
	{"curl", func(t *testing.T, root string) []string {
		for _, tool := range []string{"curl", "jq", "bash"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s is not installed (.ci/run installs it)", tool)
			}
		}
		return []string{filepath.Join(root, "kits", "curl", "example.sh")}
	}},
	{"requests", func(t *testing.T, root string) []string {
		return []string{pythonPath(t, root), filepath.Join(root, "kits", "python", "example_requests.py")}
	}},
	{"httpx", func(t *testing.T, root string) []string {
		return []string{pythonPath(t, root), filepath.Join(root, "kits", "python", "example_httpx.py")}
	}},
	{"fetch", func(t *testing.T, root string) []string {
		nodeKit(t, root)
		return []string{"node", filepath.Join(root, "kits", "node", "example_fetch.mjs")}
	}},
	{"axios", func(t *testing.T, root string) []string {
		nodeKit(t, root)
		return []string{"node", filepath.Join(root, "kits", "node", "example_axios.mjs")}
	}},
}

// runExample runs an example against srv with extra environment, and
// returns what it printed. Its exit status is not checked: a kit exits 1
// when its session has a failed verdict.
func runExample(ctx context.Context, t *testing.T, srv *Server, argv []string, env ...string) string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CA(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "CONNAUDIT_URL="+srv.URL(), "CONNAUDIT_CA="+ca), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: %v: %s", argv, ctx.Err(), out.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%v: %v", argv, err)
	}
	return out.String()
}

// sessionOf returns the one ended session of the client name.
func sessionOf(t *testing.T, reports []*SessionReport, name string) *SessionReport {
	t.Helper()
	for _, r := range reports {
		if r.Client.Name == name {
			return r
		}
	}
	t.Fatalf("no session of %s among %d", name, len(reports))
	return nil
}

func root(t *testing.T) string {
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var update = flag.Bool("update", false, "rewrite the table in ../docs/serve.md")

const (
	docPath    = "../docs/serve.md"
	tableStart = "<!-- serve table: begin -->\n"
	tableEnd   = "<!-- serve table: end -->\n"
)

// TestTable runs every kit's example client against one server at once,
// and checks that the table of verdicts committed in docs/serve.md is the
// one this run gives (go test ./serve -run TestTable -update rewrites it).
func TestTable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every kit's example client")
	}
	r := root(t)
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var argvs [][]string
	for _, ex := range examples {
		argvs = append(argvs, ex.cmd(t, r))
	}
	var wg sync.WaitGroup
	for _, argv := range argvs {
		wg.Go(func() { runExample(t.Context(), t, srv, argv) })
	}
	wg.Wait()
	srv.Close()
	reports, _ := srv.Ended()
	var sessions []*SessionReport
	for _, ex := range examples {
		s := sessionOf(t, reports, ex.name)
		if s.NotReported > 0 || s.Error != "" {
			t.Errorf("%s: %d not reported, error %q", ex.name, s.NotReported, s.Error)
		}
		sessions = append(sessions, s)
	}
	table := Table(sessions)
	if os.Getenv("CONNAUDIT_SHOW") != "" {
		for _, s := range sessions {
			var b strings.Builder
			s.WriteText(&b)
			t.Log(b.String())
		}
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(tableStart)), bytes.Index(doc, []byte(tableEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", docPath, tableStart, tableEnd)
	}
	if got := string(doc[i+len(tableStart) : j]); got == table {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(tableStart)]...), table...), doc[j:]...)
		if err := os.WriteFile(docPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the table in %s is stale (go test ./serve -run TestTable -update); this run gives:\n%s", docPath, table)
	for _, s := range sessions {
		var b strings.Builder
		s.WriteText(&b)
		t.Log(b.String())
	}
}

// TestBrokenConfigurationFailsItsContract: the example clients configured
// against contract A5 (a 500 retried: urllib3 Retry with 500 in
// status_forcelist, axios-retry's default retryCondition) fail A5 with the
// server's counts: three requests for a contract of one.
func TestBrokenConfigurationFailsItsContract(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients")
	}
	r := root(t)
	cases := []struct {
		ex, env string
	}{{"requests", "CONNAUDIT_EXAMPLE=retry-500"}, {"axios", "CONNAUDIT_EXAMPLE=default-condition"}}
	for _, c := range cases {
		t.Run(c.ex, func(t *testing.T) {
			var argv []string
			for _, ex := range examples {
				if ex.name == c.ex {
					argv = ex.cmd(t, r)
				}
			}
			for _, broken := range []bool{false, true} {
				srv, err := New()
				if err != nil {
					t.Fatal(err)
				}
				env := []string{"CONNAUDIT_RUN=^retry/500$"}
				if broken {
					env = append(env, c.env)
				}
				runExample(t.Context(), t, srv, argv, env...)
				srv.Close()
				reports, _ := srv.Ended()
				res := sessionOf(t, reports, c.ex).Results
				if len(res) != 1 || res[0].Contract != "A5" {
					t.Fatalf("results %+v", res)
				}
				got := res[0]
				if !broken {
					if !got.Pass || got.Server.Requests != 1 {
						t.Errorf("as configured: pass %v, %d requests, %v", got.Pass, got.Server.Requests, got.Mismatches)
					}
					continue
				}
				want := "A5: 500 was retried: 3 requests, contract 1"
				if got.Pass || got.Server.Requests != 3 || len(got.Mismatches) == 0 || got.Mismatches[0] != want {
					t.Errorf("broken: pass %v, %d requests, mismatches %q; want %q", got.Pass, got.Server.Requests, got.Mismatches, want)
				}
				if got.Fix == "" {
					t.Error("no fix")
				}
				t.Logf("fix: %s", got.Fix)
			}
		})
	}
}

// counts is a session's verdicts as counts, to compare sessions.
func counts(r *SessionReport) string {
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%s pass=%v n/c=%v req=%d handlers=%d writes=%d keys=%v fate=%s class=%s\n", res.Name, res.Pass,
			res.NotConfigurable != "", res.Server.Requests, res.Server.HandlersEntered, res.Server.Writes, res.Server.IdempotencyKeys,
			res.Fate, res.Class)
	}
	return b.String()
}

// TestFourAtOnce runs the requests example alone, then four of it against
// one server at once: every session's accounting is its own, the same as
// the one alone. It logs the wall times (the lead measures
// the ratio with go test ./serve -run TestFourAtOnce -v).
func TestFourAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients")
	}
	argv := examples[1].cmd(t, root(t))
	// Scenarios whose counts do not wait on a timer of the client's.
	env := "CONNAUDIT_SKIP=^(trickle-body|pool-acquire-timeout)$"
	one := func(n int) ([]*SessionReport, time.Duration) {
		srv, err := New()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { runExample(t.Context(), t, srv, argv, env) })
		}
		wg.Wait()
		took := time.Since(start)
		srv.Close()
		reports, _ := srv.Ended()
		if len(reports) != n {
			t.Fatalf("%d sessions ended, want %d", len(reports), n)
		}
		return reports, took
	}
	alone, t1 := one(1)
	four, t4 := one(4)
	want := counts(alone[0])
	ids := map[string]bool{}
	for _, r := range four {
		if got := counts(r); got != want {
			t.Errorf("session %s differs from the one alone:\n%s\nalone:\n%s", r.Session, got, want)
		}
		ids[r.Session] = true
	}
	if len(ids) != 4 {
		t.Errorf("session ids %v", ids)
	}
	t.Logf("one client: %v; four at once: %v (%.2f×)", t1.Round(time.Millisecond), t4.Round(time.Millisecond), t4.Seconds()/t1.Seconds())
	_ = json.Marshal
}
