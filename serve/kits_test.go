package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// example is a kit's example client, as kits/examples.json lists it: a
// command may audit several clients, one session each (sessions, in the
// table's order; nil: the one client).
type example struct {
	Client   string   `json:"client"`
	Kit      string   `json:"kit"`
	Args     []string `json:"args"`
	Sessions []string `json:"sessions"`
	// First: a JVM's; run first, and the others once its first session
	// has ended (Maven and a JVM starting take both cores of a small
	// machine for seconds, long enough to push curl's --speed-time, an
	// average over about 5 s, past the server's guard).
	First bool `json:"first"`
}

// names is the clients an example's command audits.
func (ex example) names() []string {
	if ex.Sessions != nil {
		return ex.Sessions
	}
	return []string{ex.Client}
}

// cmd is the command that runs ex, skipping t, saying so, when its kit's
// tools or installs are missing.
func (ex example) cmd(t *testing.T, root string) []string {
	t.Helper()
	dir := filepath.Join(root, "kits", ex.Kit)
	file := func() []string {
		if len(ex.Args) == 0 {
			t.Fatalf("kits/examples.json: %s has no args", ex.Client)
		}
		return append([]string{filepath.Join(dir, ex.Args[0])}, ex.Args[1:]...)
	}
	switch ex.Kit {
	case "curl":
		for _, tool := range []string{"curl", "jq", "bash"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s is not installed (.ci/run installs it)", tool)
			}
		}
		return file()
	case "python":
		return append([]string{pythonPath(t, root)}, file()...)
	case "node":
		nodeKit(t, root)
		return append([]string{"node"}, file()...)
	case "rust":
		return append([]string{rustKit(t, root)}, ex.Args...)
	case "java":
		return javaKit(t, root, ex.Args...)
	}
	t.Fatalf("kits/examples.json: %s: no kit %q (curl, python, node, rust, java)", ex.Client, ex.Kit)
	return nil
}

// examples is kits/examples.json's list; a client added to a kit is a line
// there, not here.
var examples = func() []example {
	b, err := os.ReadFile(filepath.Join("..", "kits", "examples.json"))
	if err != nil {
		panic(err) // the repository's own file: the tests cannot run without it
	}
	var list struct {
		Examples []example `json:"examples"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		panic(fmt.Sprintf("kits/examples.json: %v", err))
	}
	return list.Examples
}()

// TestExamplesListed: kits/examples.json is well formed, and lists every
// example file of the Python and Node kits and every client a terms file
// names, so that no client of a kit is left out of the table.
func TestExamplesListed(t *testing.T) {
	r := root(t)
	kits := map[string]bool{"curl": true, "python": true, "node": true, "rust": true, "java": true}
	files, sessions := map[string]bool{}, map[string]bool{}
	for _, ex := range examples {
		if !kits[ex.Kit] || ex.Client == "" || (ex.Kit != "java" && len(ex.Args) == 0) {
			t.Errorf("kits/examples.json: %+v: a client, a kit of %v and args", ex, slices.Sorted(maps.Keys(kits)))
		}
		if len(ex.Args) > 0 {
			files[filepath.Join(ex.Kit, ex.Args[0])] = true
		}
		for _, name := range ex.names() {
			if sessions[name] {
				t.Errorf("kits/examples.json: session %s twice", name)
			}
			sessions[name] = true
		}
	}
	for _, glob := range []string{"python/example_*.py", "node/example_*.mjs"} {
		found, _ := filepath.Glob(filepath.Join(r, "kits", glob))
		if len(found) == 0 {
			t.Errorf("no kits/%s", glob)
		}
		for _, f := range found {
			if rel, _ := filepath.Rel(filepath.Join(r, "kits"), f); !files[rel] {
				t.Errorf("kits/%s is in no line of kits/examples.json", rel)
			}
		}
	}
	terms, _ := filepath.Glob(filepath.Join(r, "kits", "*", "*.terms.json"))
	java, _ := filepath.Glob(filepath.Join(r, "kits", "java", "src", "main", "resources", "*.terms.json"))
	for _, f := range append(terms, java...) {
		if name := strings.TrimSuffix(filepath.Base(f), ".terms.json"); !sessions[name] {
			t.Errorf("%s: no session of %s in kits/examples.json", f, name)
		}
	}
}

// exampleOf is the example of the client name.
func exampleOf(t *testing.T, name string) example {
	t.Helper()
	for _, ex := range examples {
		if ex.Client == name {
			return ex
		}
	}
	t.Fatalf("kits/examples.json has no %s", name)
	return example{}
}

// clients keeps a JVM's start apart from the tests that run clients on
// timers, which otherwise run beside one another (t.Parallel), so that
// the package's tests take about as long as the longest, TestTable's curl
// session: Maven and a JVM starting take both cores of a small machine for
// seconds. A test that runs clients holds it for reading ([beside]); a
// JVM's run, for writing.
var clients sync.RWMutex

// beside runs t beside the package's other tests that run clients, apart
// from a JVM's start ([clients]). Only a top-level test calls it.
func beside(t *testing.T) {
	t.Parallel()
	clients.RLock()
	t.Cleanup(clients.RUnlock)
}

// javaKit is the command that runs kits/java's ServeTest with Maven, with
// extra -D properties; it skips the test, saying so, when mvn or a JDK 17
// javac is not on PATH (kits/java/ci.sh installs them; CI has them).
func javaKit(t *testing.T, root string, props ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("mvn"); err != nil {
		t.Skip("mvn is not installed: the Java kit's columns need Maven and a JDK 17 (kits/java/ci.sh installs them)")
	}
	out, err := exec.Command("javac", "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "javac 17") {
		t.Skipf("no JDK 17 javac on PATH (%q): the Java kit's columns need it (kits/java/ci.sh installs it)", strings.TrimSpace(string(out)))
	}
	return append([]string{"mvn", "-q", "-B", "-f", filepath.Join(root, "kits", "java", "pom.xml"), "test",
		"-Dtest=ServeTest", "-Dsurefire.failIfNoSpecifiedTests=false"}, props...)
}

// rustKit is the Rust kit's binary, built by kits/rust/ci.sh (cargo build
// --release --locked in kits/rust); it skips the test, saying so, when it
// is not built: go test builds no Cargo project.
func rustKit(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(root, "kits", "rust", "target", "release", "connaudit-kit-rust")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is not built: the Rust kit's columns need it (cargo build --release --locked in kits/rust; kits/rust/ci.sh builds it)", bin)
	}
	return bin
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

var (
	update = flag.Bool("update", false, "rewrite the table in ../docs/serve.md (and run TestTable)")
	table  = flag.Bool("table", false, "run TestTable: every kit's example client, about 4 minutes (.ci/run passes it)")
)

const (
	docPath    = "../docs/serve.md"
	tableStart = "<!-- serve table: begin -->\n"
	tableEnd   = "<!-- serve table: end -->\n"
)

// TestTable runs every kit's example client against one server at once
// (the Java kit's first, the others once its first session has ended: its
// JVM is up then), and checks that the table of verdicts committed in
// docs/serve.md is the one this run gives (go test ./serve -run TestTable
// -update rewrites it). It runs with -table or -update alone: every kit's
// example client, the Java kit's six sessions among them, takes about four
// minutes, as long as the rest of the package three times over; .ci/run
// runs it (go test ./serve -run '^TestTable$' -table). The Java columns
// come from kits/java run with Maven under the same server; without mvn and a JDK 17 the test skips, saying
// so, as it does without curl, the Python venv or kits/node's packages: a
// table with a column missing cannot be compared.
func TestTable(t *testing.T) {
	if testing.Short() || !*table && !*update {
		t.Skip("runs every kit's example client, about 4 minutes: go test ./serve -run '^TestTable$' -table (.ci/run does)")
	}
	t.Parallel()
	r := root(t)
	col := &collector{}
	var argvs, first [][]string
	var firstNames []string
	for _, ex := range examples {
		if ex.First {
			first = append(first, ex.cmd(t, r))
			firstNames = append(firstNames, ex.names()...)
		} else {
			argvs = append(argvs, ex.cmd(t, r))
		}
	}
	up := make(chan struct{}) // a session of the first commands ended
	var once sync.Once
	srv, err := New(OnSessionEnd(func(rep *SessionReport) {
		col.add(rep)
		if slices.Contains(firstNames, rep.Client.Name) {
			once.Do(func() { close(up) })
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var wg sync.WaitGroup
	// Maven and a JVM starting take both cores of a small machine for
	// seconds: no client on a timer runs meanwhile ([clients]).
	clients.Lock()
	for _, argv := range first {
		wg.Go(func() {
			defer once.Do(func() { close(up) }) // also when it fails
			runExample(t.Context(), t, srv, argv)
		})
	}
	<-up
	clients.Unlock()
	clients.RLock()
	for _, argv := range argvs {
		wg.Go(func() { runExample(t.Context(), t, srv, argv) })
	}
	wg.Wait()
	clients.RUnlock()
	srv.Close()
	reports := col.all()
	var sessions []*SessionReport
	for _, ex := range examples {
		for _, name := range ex.names() {
			s := sessionOf(t, reports, name)
			if s.NotReported > 0 || s.Error != "" {
				t.Errorf("%s: %d not reported, error %q", name, s.NotReported, s.Error)
			}
			sessions = append(sessions, s)
		}
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
			argv := exampleOf(t, c.ex).cmd(t, r)
			for _, broken := range []bool{false, true} {
				col := &collector{}
				srv, err := New(OnSessionEnd(col.add))
				if err != nil {
					t.Fatal(err)
				}
				env := []string{"CONNAUDIT_RUN=^retry/500$"}
				if broken {
					env = append(env, c.env)
				}
				runExample(t.Context(), t, srv, argv, env...)
				srv.Close()
				reports := col.all()
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
	beside(t)
	argv := exampleOf(t, "requests").cmd(t, root(t))
	// Scenarios whose counts do not wait on a timer of the client's.
	env := "CONNAUDIT_SKIP=^(trickle-body|pool-acquire-timeout)$"
	one := func(n int) ([]*SessionReport, time.Duration) {
		col := &collector{}
		srv, err := New(OnSessionEnd(col.add))
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
		reports := col.all()
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

// javaSession returns the session of client whose configuration names
// mutation ("" for the source's own: none named).
func javaSession(t *testing.T, reports []*SessionReport, client, mutation string) *SessionReport {
	t.Helper()
	for _, r := range reports {
		named := strings.HasPrefix(r.Client.Config, "MUTATED: ")
		if r.Client.Name == client && (mutation == "" && !named || mutation != "" && strings.HasPrefix(r.Client.Config, "MUTATED: "+mutation+";")) {
			return r
		}
	}
	t.Fatalf("no session of %s with mutation %q among %d", client, mutation, len(reports))
	return nil
}

// TestJavaMutations: the source's own WebClient and RestClient, then each
// mutation of their configuration, through serve in one JVM. Each mutation
// that breaks a contract fails it, with the server's counts, where the
// source's configuration passes: retrying 500 (both clients) breaks A5,
// 3 requests for 1; the total timeout before retryWhen breaks A8, a third
// attempt. Dropping disableRetry(true) breaks none: Reactor Netty's own
// retry sends again only a request none of which was written, which is
// safe — reset-before-send then passes by a send on a new connection (1
// request, 200 to the caller) where the source's WebClient gives the
// caller the reset (0 requests, a finding that sending again would have
// been safe) — while every scenario in which the server read the request
// (H1 with a FIN or an RST, close-before-send) is the same with it on or
// off: Reactor Netty never sends again a request it wrote. Nor does it
// change any of the stale-reuse scenarios: in each the request was written
// (on a connection closed as it arrived, read and cut, gone dark) or went
// on a new connection (the limit, the server's idle timeout), as
// kits/java's StaleReuseTest measures against a raw socket. Each session
// declares its client's idle timeout: WebClient none (0: Reactor Netty's
// pool has no maxIdleTime unless set), RestClient the JDK 17 HttpClient's
// keep-alive timeout, 1200 s.
func TestJavaMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Java kit")
	}
	argv := javaKit(t, root(t), "-Dconnaudit.mutations=;RETRY_500;TOTAL_BEFORE_RETRY;KEEP_HIDDEN_RETRY")
	col := &collector{}
	srv, err := New(OnSessionEnd(col.add), Select(regexp.MustCompile(`^(retry/500|retry/total-budget|reset-before-send|close-before-send|`+
		`retry/hidden-retry|retry/hidden-retry-reset|`+strings.Join(staleReuse, "|")+`)$`), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := runExample(t.Context(), t, srv, argv)
	srv.Close()
	reports := col.all()
	if len(reports) != 6 {
		t.Fatalf("%d sessions, want 6 (the source's and RETRY_500's for both clients, two more for WebClient):\n%s", len(reports), out)
	}
	result := func(r *SessionReport, name string) Result {
		t.Helper()
		res := resultOf(t, r, name)
		m := "as the source configures it"
		if rest, ok := strings.CutPrefix(r.Client.Config, "MUTATED: "); ok {
			m, _, _ = strings.Cut(rest, ";")
		}
		t.Logf("%s %s, %s: pass %v, caller %s, %d requests, %d connections, %q", r.Client.Name, m, name, res.Pass,
			callerText(orNone(res.Caller)), res.Server.Requests, len(res.Server.Connections), res.Mismatches)
		return res
	}
	for _, client := range []string{"webclient", "restclient"} {
		src := javaSession(t, reports, client, "")
		for _, name := range []string{"retry/500", "retry/total-budget"} {
			if r := result(src, name); !r.Pass {
				t.Errorf("%s as the source configures it fails %s: %q", client, name, r.Mismatches)
			}
		}
		r := result(javaSession(t, reports, client, "RETRY_500"), "retry/500")
		if want := "A5: 500 was retried: 3 requests, contract 1"; r.Pass || r.Server.Requests != 3 || len(r.Mismatches) == 0 || r.Mismatches[0] != want {
			t.Errorf("%s retrying 500: pass %v, %d requests, %q; want %q", client, r.Pass, r.Server.Requests, r.Mismatches, want)
		}
		if r.Fix != kitTerms(t)[client]["retry_statuses"] {
			t.Errorf("%s retrying 500: fix %q", client, r.Fix)
		}
	}
	src := javaSession(t, reports, "webclient", "")
	r := result(javaSession(t, reports, "webclient", "TOTAL_BEFORE_RETRY"), "retry/total-budget")
	if want := "A8: 503 was retried past the budget: 3 requests, contract 2"; r.Pass || r.Server.Requests != 3 ||
		!slices.Contains(r.Mismatches, want) || r.Caller == nil || r.Caller.Status != 503 {
		t.Errorf("the total timeout before retryWhen: pass %v, %d requests, caller %+v, %q; want %q", r.Pass, r.Server.Requests, r.Caller, r.Mismatches, want)
	}
	if !strings.Contains(r.Fix, kitTerms(t)["webclient"]["retry_budget"]) {
		t.Errorf("the total timeout before retryWhen: fix %q", r.Fix)
	}

	// Reactor Netty's own retry sends again a request none of which was
	// written: safe, so both pass; what differs is the path. With it off
	// (the source's disableRetry(true)) the caller gets the reset and a
	// finding says that sending again would have been safe; with it on, the
	// POST goes again on a new connection (1 request, not hidden: the
	// server read it once).
	kept := javaSession(t, reports, "webclient", "KEEP_HIDDEN_RETRY")
	on, off := result(kept, "reset-before-send"), result(src, "reset-before-send")
	if !off.Pass || off.Server.Requests != 0 || off.Caller == nil || off.Caller.Error == nil || off.Caller.Error.Kind != KindConnection ||
		len(off.Findings) != 1 || off.Findings[0].Class != FindingLossToCaller {
		t.Errorf("reset-before-send with disableRetry(true): pass %v, %d requests, caller %+v, %q, findings %+v", off.Pass,
			off.Server.Requests, off.Caller, off.Mismatches, off.Findings)
	}
	if !on.Pass || on.HiddenRetry || on.Server.Requests != 1 || on.Caller == nil || on.Caller.Status != 200 || len(on.Findings) != 0 {
		t.Errorf("reset-before-send with disableRetry(false): pass %v, hidden %v, %d requests, caller %+v, %q, findings %+v", on.Pass,
			on.HiddenRetry, on.Server.Requests, on.Caller, on.Mismatches, on.Findings)
	}
	// What the server read, it reads once, the retry on or off.
	for _, name := range []string{"close-before-send", "retry/hidden-retry", "retry/hidden-retry-reset"} {
		a, b := result(src, name), result(kept, name)
		if !a.Pass || !b.Pass || a.Server.Requests != b.Server.Requests || a.HiddenRetry || b.HiddenRetry {
			t.Errorf("%s: disableRetry(true) pass %v, %d requests; (false) pass %v, %d requests", name, a.Pass, a.Server.Requests, b.Pass, b.Server.Requests)
		}
	}
	// The stale-reuse scenarios: the same verdict, caller and counts with
	// Reactor Netty's retry on or off, and what the raw socket measured:
	// the loss to the caller where the server read nothing (a request
	// written on a connection closed as it arrived, 1 unread), a POST read
	// once and committed once, a dark connection's timeout, the next
	// request on a new connection after a limit or an idle close.
	for _, name := range staleReuse {
		a, b := result(src, name), result(kept, name)
		// server-idle-timeout fails either way: the declared idle timeout
		// (0, none: Reactor Netty's pool keeps an idle connection until the
		// server closes it) is not below the servers' keep-alive timeout,
		// though the request went on a new connection.
		wantPass := name != "server-idle-timeout"
		if name == "server-idle-timeout" && (len(a.Mismatches) != 1 || !strings.HasPrefix(a.Mismatches[0], "idle timeout: ")) {
			t.Errorf("%s: %q, want the idle timeout's mismatch alone", name, a.Mismatches)
		}
		if a.Pass != wantPass || b.Pass != wantPass || a.HiddenRetry || b.HiddenRetry || outcomeKind(a.Caller) != outcomeKind(b.Caller) ||
			a.Server.Requests != b.Server.Requests || a.Server.Unread != b.Server.Unread || a.Server.Writes != b.Server.Writes {
			t.Errorf("%s: disableRetry(true) pass %v, caller %s, %d requests, %d unread; (false) pass %v, caller %s, %d requests, %d unread",
				name, a.Pass, outcomeKind(a.Caller), a.Server.Requests, a.Server.Unread, b.Pass, outcomeKind(b.Caller), b.Server.Requests,
				b.Server.Unread)
		}
		if want := webclientStale[name]; outcomeKind(a.Caller) != want.caller || a.Server.Requests != want.requests ||
			a.Server.Unread != want.unread {
			t.Errorf("%s: caller %s, %d requests, %d unread; the raw socket's truth: %s, %d, %d", name, outcomeKind(a.Caller),
				a.Server.Requests, a.Server.Unread, want.caller, want.requests, want.unread)
		}
	}
	for client, want := range map[string]float64{"webclient": 0, "restclient": 1200 * 1000} {
		switch got := javaSession(t, reports, client, "").Client.IdleTimeoutMS; {
		case got == nil:
			t.Errorf("%s: no idle_timeout_ms, want %v", client, want)
		case *got != want:
			t.Errorf("%s: idle_timeout_ms %v, want %v", client, *got, want)
		}
	}
}

// staleReuse are the catalogue's stale-reuse scenarios over HTTP/1.
var staleReuse = []string{"stale-close-before-read", "stale-reset-before-read", "stale-post-close-before-read",
	"stale-post-reset-before-read", "stale-post-close-after-read", "stale-post-reset-after-read", "stale-post-key-after-read",
	"go-dark", "request-limit", "request-limit-silent", "server-idle-timeout"}

// webclientStale is what kits/java's StaleReuseTest measured of the
// source's WebClient on each stale-reuse fault: the caller's outcome, the
// requests the server read and those sent on a connection it was closing.
var webclientStale = map[string]struct {
	caller           string
	requests, unread int64
}{
	"stale-close-before-read": {"connection", 0, 1}, "stale-reset-before-read": {"connection", 0, 1},
	"stale-post-close-before-read": {"connection", 0, 1}, "stale-post-reset-before-read": {"connection", 0, 1},
	"stale-post-close-after-read": {"connection", 1, 0}, "stale-post-reset-after-read": {"connection", 1, 0},
	"stale-post-key-after-read": {"connection", 1, 0}, "go-dark": {"timeout", 0, 0},
	"request-limit": {"200", 1, 0}, "request-limit-silent": {"200", 1, 0}, "server-idle-timeout": {"200", 1, 0},
}

// outcomeKind says an outcome as its status or its error's kind.
func outcomeKind(o *Outcome) string {
	switch {
	case o == nil:
		return "none"
	case o.Error != nil:
		return o.Error.Kind
	}
	return fmt.Sprint(o.Status)
}

func orNone(o *Outcome) *Outcome {
	if o == nil {
		return &Outcome{Error: &ErrorOutcome{Kind: "none"}}
	}
	return o
}

// collector keeps the reports of a server's ended sessions (OnSessionEnd).
type collector struct {
	mu      sync.Mutex
	reports []*SessionReport
}

func (c *collector) add(r *SessionReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports = append(c.reports, r)
}

// all returns the reports of the sessions that ended so far.
func (c *collector) all() []*SessionReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*SessionReport(nil), c.reports...)
}
