package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
)

// TestVerdictsInJSON: each result's verdict says what became of it —
// passed, not configurable, skipped, not reported — and only a pass has
// "pass": true; the counts add up to the scenarios offered, and the
// expected attempts are the scenario's (1, or 3 where the retries are
// the point), as the scenario's expect said.
func TestVerdictsInJSON(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^(ok|status-404|status-503|retry/503-503-ok)$`)
	if len(list) != 4 {
		t.Fatalf("%d scenarios", len(list))
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(url string) int {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, sc := range list {
		if want := map[string]int{"retry/503-503-ok": 3}[sc.Name]; sc.Expect.Attempts != max(1, want) {
			t.Errorf("%s: expect.attempts %d", sc.Name, sc.Expect.Attempts)
		}
		rep := KitReport{Scenario: sc.Name}
		switch sc.Name {
		case "ok":
			o, ok := Outcome{Status: get(sc.URL)}, Outcome{Status: get(sc.OKURL)}
			rep.Outcome, rep.OK = &o, &ok
		case "status-404":
			rep.Skipped = "not run here"
		case "retry/503-503-ok":
			rep.NotConfigurable = "no retry layer"
		case "status-503":
			continue // not reported
		}
		ctlDo(t, "POST", opened.ReportURL, rep, nil)
	}
	var done SessionReport
	ctlDo(t, "POST", opened.DoneURL, Done{}, &done)
	want := map[string]struct {
		verdict  string
		attempts int
	}{
		"ok": {verdictPass, 1}, "status-404": {verdictSkipped, 1}, "status-503": {verdictNotReported, 1},
		"retry/503-503-ok": {verdictNotConfigurable, 3},
	}
	for _, res := range done.Results {
		w := want[res.Name]
		if res.Verdict != w.verdict || res.Pass != (w.verdict == verdictPass) || res.Expected.Attempts != w.attempts {
			t.Errorf("%s: verdict %q, pass %v, expected attempts %d; want %q, %d", res.Name, res.Verdict, res.Pass,
				res.Expected.Attempts, w.verdict, w.attempts)
		}
	}
	if done.Passed != 1 || done.Skipped != 1 || done.NotConfigurable != 1 || done.NotReported != 1 || done.Failed != 0 {
		t.Errorf("counts: %s", done.Counts())
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, []*SessionReport{&done}); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"verdict":"not-configurable"`, `"verdict":"skipped"`, `"verdict":"not-reported"`,
		`"verdict":"pass"`, `"expected":{"status":200,"attempts":3}`} {
		if !strings.Contains(compact.String(), s) {
			t.Errorf("no %s in the JSON:\n%s", s, compact.String())
		}
	}
}

// TestNotReportedWhenCut: the scenarios of a session the server ended
// before the kit said done are not reported because the session ended,
// not because the kit said done without them; a session whose kit said
// done says that.
func TestNotReportedWhenCut(t *testing.T) {
	reports := make(chan *SessionReport, 2)
	srv, err := New(OnSessionEnd(func(r *SessionReport) { reports <- r }))
	if err != nil {
		t.Fatal(err)
	}
	opened, _ := openSession(t, srv, `^status-404$`)
	ctlDo(t, "POST", opened.DoneURL, Done{}, nil)
	cut, _ := openSession(t, srv, `^status-404$`)
	srv.Close()
	for range 2 {
		r := <-reports
		want := "not reported: the kit said done without reporting this scenario"
		if r.Session == cut.Session {
			want = "not reported: the session ended before the kit reported it"
		}
		if len(r.Results) != 1 || len(r.Results[0].Mismatches) != 1 || r.Results[0].Mismatches[0] != want {
			t.Errorf("session %s (error %q): %+v, want %q", r.Session, r.Error, r.Results, want)
		}
		var b bytes.Buffer
		r.WriteText(&b)
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text does not say %q:\n%s", want, b.String())
		}
	}
}

// TestTextConnectionColumn: the CONNECTION column says what became of
// the connection in a word, who closed it and why under the row, nothing
// cut, every line within 100 columns.
func TestTextConnectionColumn(t *testing.T) {
	one := 1
	r := &SessionReport{Client: Client{Name: "c"}, Kit: "k", Session: "s1", Passed: 3, Results: []Result{
		{Name: "retry/response-header-timeout", Verdict: verdictPass, Pass: true, Class: "response-header-timeout",
			Attempts: &one, Server: Evidence{Requests: 1}, Fate: "closed by client (request-error)", ElapsedMS: 12345},
		{Name: "stale-post-reset-before-read", Verdict: verdictPass, Pass: true, Class: "reset", Attempts: &one,
			Server: Evidence{Requests: 1, Writes: 1}, Contract: "W2", HiddenRetry: true, Fate: "closed by server (server-reset)"},
		{Name: "ok", Verdict: verdictPass, Pass: true, Class: "ok", Caller: &Outcome{Status: 200}, Fate: "reused"},
	}}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"  closed by client: request-error\n", "  closed by server: server-reset\n",
		"  reused  ", "  closed  "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "…") {
		t.Errorf("a cell was cut:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > textWidth {
			t.Errorf("%d columns: %q", len([]rune(l)), l)
		}
	}
}

// TestKitName: a kit's command is named by the script its interpreter
// runs, else by its command line, its secrets masked.
func TestKitName(t *testing.T) {
	script := filepath.Join(t.TempDir(), "example_requests.py")
	if err := os.WriteFile(script, []byte("pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kits/curl/example.sh"}, "kits/curl/example.sh"},
		{[]string{"kits/python/.venv/bin/python", script}, script},
		{[]string{"python3", "-u", script, "-v"}, script},
		{[]string{"mvn", "-q", "test"}, `"mvn -q test"`},
		{[]string{"sh", "-c", "exit 3"}, `"sh -c exit 3"`},
	} {
		if got := kitName(c.args); got != c.want {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
	if got := kitName([]string{"kit", "https://u:hunter2secret@127.0.0.1/x?token=hunter3secret"}); strings.Contains(got, "hunter") {
		t.Errorf("a secret in %q", got)
	}
}

// TestRunSaysHowTheKitExited: a kit that exits 1 after the failures its
// session reported is said to, named by its script; one that exits 3
// having reported nothing reads as the failure it is; neither names the
// interpreter or the server's key.
func TestRunSaysHowTheKitExited(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	failing := filepath.Join(dir, "failing.sh")
	crashing := filepath.Join(dir, "crashing.sh")
	if err := os.WriteFile(failing, []byte("\"$SELF\" || exit 9\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashing, []byte("exit 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	selfKit(t, 1) // the one session fails
	t.Setenv("SELF", self)
	for _, c := range []struct{ script, want string }{
		{failing, "kit " + failing + " exited with status 1 after the failures it reported"},
		{crashing, "kit " + crashing + " failed: it exited with status 3 before any scenario was judged"},
	} {
		var key string
		out, err := Run(testkit.Bounded(t), RunConfig{Command: []string{"sh", c.script}, Deadline: testkit.WaitBound,
			CommandOutput: io.Discard, Listening: func(url, _ string) { key = url }})
		if err != nil {
			t.Fatal(err)
		}
		if out.Command != c.want || strings.Contains(out.Command, key) {
			t.Errorf("%q, want %q", out.Command, c.want)
		}
	}
}
