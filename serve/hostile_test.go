package serve

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testkit"
)

// The hostile-serve suite: what a kit, another process on the machine, a
// web page or the kit's own command can do to serve, and what serve must
// still do — report every session, leave nothing running, answer only its
// kits, refuse numbers out of range.

// selfKit makes the test binary the kit of Run: n sessions, the first
// failed (TestMain runs servekit.Main when its environment is set).
func selfKit(t *testing.T, n int) []string {
	t.Setenv(servekit.EnvSessions, strconv.Itoa(n))
	t.Setenv(servekit.EnvFailFirst, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self}
}

// lockedBuffer is a writer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunEverySessionReported: a command that opens 200 sessions, the
// first failed: every session reaches every output (text, one JSON
// document, JUnit), the failed one among them, and the run fails.
func TestRunEverySessionReported(t *testing.T) {
	const n = 200
	var text, js lockedBuffer
	junitPath := filepath.Join(t.TempDir(), "serve.xml")
	out, err := Run(testkit.Bounded(t), RunConfig{Command: selfKit(t, n), Deadline: testkit.WaitBound, CommandOutput: &text,
		Text: &text, JSON: &js, JUnitFile: junitPath})
	if err != nil {
		t.Fatal(err)
	}
	if out.Sessions != n || len(out.Failed) != 1 || !strings.HasPrefix(out.Failed[0].Session, "s1-") || out.Command != "" ||
		out.Output != nil || out.OK(true) {
		t.Fatalf("outcome: %d sessions, failed %+v, command %q, output %v", out.Sessions, out.Failed, out.Command, out.Output)
	}
	if got := strings.Count(text.String(), "(kit servekit, session s"); got != n {
		t.Errorf("%d sessions in the text, want %d", got, n)
	}
	var doc struct {
		Protocol string           `json:"protocol"`
		Sessions []*SessionReport `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil || doc.Protocol != Protocol || len(doc.Sessions) != n {
		t.Fatalf("JSON: %v, protocol %q, %d sessions", err, doc.Protocol, len(doc.Sessions))
	}
	if s := doc.Sessions[0]; s.OK || s.NotReported != 1 || !strings.HasPrefix(s.Session, "s1-") {
		t.Errorf("the first session: %s ok %v", s.Session, s.OK)
	}
	b, err := os.ReadFile(junitPath)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil || len(suites.Suites) != n || suites.Suites[0].Failures != 1 {
		t.Fatalf("JUnit: %v, %d suites", err, len(suites.Suites))
	}
	if entries, _ := os.ReadDir(filepath.Dir(junitPath)); len(entries) != 1 {
		t.Errorf("the JUnit file's directory holds %d files, want it alone", len(entries))
	}
}

// TestOnSessionEndStalledReader: sessions end while their reports'
// reader reads nothing. Kits run 150 sessions, 8 at a time; the reader
// waits until the kits can go no further (all 8 waiting for their done)
// or have finished. Every report is delivered once, the calls never
// overlap, and a kit's done is answered only once its report was
// delivered: the kits wait for the reader, no report waits in memory.
func TestOnSessionEndStalledReader(t *testing.T) {
	const n, workers = 150, 8
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	var mu sync.Mutex
	delivered := map[string]int{}
	var inside, overlaps atomic.Int32
	srv, err := New(OnSessionEnd(func(r *SessionReport) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		<-gate
		mu.Lock()
		delivered[r.Session]++
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := testkit.Bounded(t)
	kit := servekit.New(srv.URL())
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var inDone, stalls atomic.Int32
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				o, err := kit.Open(ctx, "servekit", "^ok$")
				if err == nil && i > 0 {
					err = kit.PassOK(ctx, o)
				}
				if err == nil {
					if inDone.Add(1) == workers {
						stalls.Add(1)
						release() // the kits can go no further
					}
					err = kit.Done(ctx, o)
					inDone.Add(-1)
				}
				mu.Lock()
				got := delivered[o.Session]
				mu.Unlock()
				if err == nil && got != 1 {
					err = fmt.Errorf("session %s's done was answered with its report delivered %d times", o.Session, got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	release()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("the kits were held by the reader %d times", stalls.Load())
	if len(delivered) != n || overlaps.Load() != 0 {
		t.Errorf("%d reports delivered, want %d; %d calls overlapped", len(delivered), n, overlaps.Load())
	}
}

// stubborn is serve/testdata/stubborn.sh, a kit that ignores SIGINT and
// SIGTERM and forks a child that does too.
func stubborn(t *testing.T) string {
	p, err := filepath.Abs("testdata/stubborn.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// running reports whether the process pid runs: it exists and is no
// zombie (a process killed whose parent is gone waits as a zombie until
// init reaps it, and an init that reaps nothing leaves it: it runs no
// more).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // no /proc: trust kill
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// readPids reads the pids a kit script wrote to file, and has them killed
// when the test ends, whatever it finds.
func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the script did not write its pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	}
	return pids
}

// TestRunStopsTheProcessGroup: a kit that ignores SIGINT and SIGTERM and
// forks a child that does too is stopped, child and all, at its deadline,
// and when serve is interrupted; a kit that exits leaving a child that
// holds its output (a pipe serve copies) is not waited for past the grace
// period, and its child is stopped. Nothing runs once Run returned. The
// time from the deadline or the interruption to Run's return is logged.
func TestRunStopsTheProcessGroup(t *testing.T) {
	const grace = 500 * time.Millisecond
	for _, c := range []string{"deadline", "interrupted", "exited-leaving-a-child"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(testkit.Bounded(t))
			defer cancel()
			pidFile := filepath.Join(t.TempDir(), "pids")
			cfg := RunConfig{Command: []string{stubborn(t), pidFile}, Deadline: testkit.WaitBound, Grace: grace}
			var stopAt atomic.Int64 // when the deadline passed or serve was interrupted
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cfg.CommandOutput = w // the command's own: nothing copies it
			ready := make(chan struct{})
			go func() {
				s := bufio.NewScanner(r)
				for s.Scan() {
					if s.Text() == "ready" {
						close(ready)
					}
				}
			}()
			switch c {
			case "deadline":
				cfg.Deadline = time.Second
			case "interrupted":
				go func() {
					<-ready
					stopAt.Store(time.Now().UnixNano())
					cancel()
				}()
			case "exited-leaving-a-child":
				cfg.Command = []string{"sh", "-c", `sleep 1000 & echo "$$ $!" >"$1"; echo ready`, "sh", pidFile}
				cfg.CommandOutput = &lockedBuffer{} // copied through a pipe the child holds
			}
			start := time.Now()
			out, err := Run(ctx, cfg)
			end := time.Now()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			pids := readPids(t, pidFile)
			switch c {
			case "deadline":
				stopAt.Store(start.Add(cfg.Deadline).UnixNano())
				if !strings.Contains(out.Command, "was stopped: its deadline of 1s passed") {
					t.Errorf("command: %q", out.Command)
				}
			case "interrupted":
				if !strings.Contains(out.Command, "was stopped: serve was interrupted") {
					t.Errorf("command: %q", out.Command)
				}
			case "exited-leaving-a-child":
				if out.Command != "" {
					t.Errorf("command: %q", out.Command)
				}
			}
			if stopAt.Load() != 0 {
				t.Logf("Run returned %v after the stop (grace %v)", end.Sub(time.Unix(0, stopAt.Load())).Round(time.Millisecond), grace)
			} else {
				t.Logf("Run returned %v after it started (grace %v)", end.Sub(start).Round(time.Millisecond), grace)
			}
			for _, pid := range pids {
				if running(pid) {
					t.Errorf("process %d of the kit's still runs", pid)
				}
			}
		})
	}
}

// ctl sends a control request with the given headers and returns the
// status and the body.
func ctl(t *testing.T, method, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: testkit.WaitBound, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControlAPIAccess: the control API answers only who has
// CONNAUDIT_URL's key, at a Host that names the server, from no web page,
// with JSON; every URL it hands out carries the key; session ids are
// unguessable; another process cannot lock the kits out.
func TestControlAPIAccess(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := srv.URL()
	key := srv.key
	hostPort := strings.TrimPrefix(base[:strings.Index(base, "/k/")], "http://")
	_, port, _ := strings.Cut(hostPort, ":")
	root := "http://" + hostPort
	open := `{"protocol":"connaudit.serve/v1","kit":"t","client":{"name":"x"},"run":"^(ok|cancel-in-handler|idle-close)$"}`
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			if a != k {
				out[a] = b
			}
		}
		return out
	}
	otherKey := strings.Repeat("0", len(key))
	cases := []struct {
		name, url string
		hdr       map[string]string
		code      int
		says      string
	}{
		{"no key", root + "/v1/sessions", jsonCT, 404, "CONNAUDIT_URL's, key included"},
		{"another key", root + "/k/" + otherKey + "/v1/sessions", jsonCT, 404, "not found"},
		{"a key cut short", root + "/k/" + key[:len(key)-1] + "/v1/sessions", jsonCT, 404, "not found"},
		{"the key longer", root + "/k/" + key + "0/v1/sessions", jsonCT, 404, "not found"},
		{"the key alone", root + "/k/" + key, jsonCT, 404, "no such endpoint"},
		{"a rebound name", base + "/v1/sessions", with(jsonCT, "Host", "attacker.example:"+port), 421, "Host"},
		{"another port", base + "/v1/sessions", with(jsonCT, "Host", "127.0.0.1:1"), 421, "Host"},
		{"a web page", base + "/v1/sessions", with(jsonCT, "Origin", "http://attacker.example"), 403, "Origin"},
		{"a sandboxed page", base + "/v1/sessions", with(jsonCT, "Origin", "null"), 403, "Origin"},
		{"text/plain", base + "/v1/sessions", map[string]string{"Content-Type": "text/plain"}, 415, "application/json"},
		{"a form", base + "/v1/sessions", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"no type", base + "/v1/sessions", nil, 415, "application/json"},
		{"JSON in Latin-1", base + "/v1/sessions", map[string]string{"Content-Type": "application/json; charset=latin1"}, 415, "application/json"},
		{"JSON", base + "/v1/sessions", jsonCT, 201, `"session"`},
		{"JSON in UTF-8", base + "/v1/sessions", map[string]string{"Content-Type": "application/json;charset=UTF-8"}, 201, `"session"`},
		{"localhost", base + "/v1/sessions", with(jsonCT, "Host", "localhost:"+port), 201, `"session"`},
		{"its own page", base + "/v1/sessions", with(jsonCT, "Origin", "http://127.0.0.1:"+port), 201, `"session"`},
	}
	for _, c := range cases {
		code, body := ctl(t, "POST", c.url, c.hdr, open)
		if code != c.code || !strings.Contains(body, c.says) || !strings.Contains(body, Protocol) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.says)
		}
		if code != 201 && (strings.Contains(body, key) || strings.Contains(body, otherKey)) {
			t.Errorf("%s: the answer shows a key: %s", c.name, body)
		}
	}
	// Another process, without the key, opens no session: the kit is
	// never locked out.
	for range maxSessions + 1 {
		if code, _ := ctl(t, "POST", root+"/v1/sessions", jsonCT, open); code != 404 {
			t.Fatalf("a session opened without the key: %d", code)
		}
	}
	var o Opened
	if code := ctlDo(t, "POST", base+"/v1/sessions", json.RawMessage(open), &o); code != 201 {
		t.Fatalf("the kit is locked out: %d", code)
	}
	for name, u := range map[string]string{"scenarios_url": o.ScenariosURL, "report_url": o.ReportURL, "done_url": o.DoneURL} {
		if !strings.HasPrefix(u, base+"/v1/sessions/") {
			t.Errorf("%s %s does not carry the key", name, u)
		}
	}
	id, ok := strings.CutPrefix(o.Session, "s")
	_, suffix, _ := strings.Cut(id, "-")
	if b, err := hex.DecodeString(suffix); !ok || err != nil || len(b) < 16 {
		t.Errorf("session id %s: fewer than 128 random bits", o.Session)
	}
	var list Scenarios
	ctlDo(t, "GET", o.ScenariosURL, nil, &list)
	for _, sc := range list.Scenarios {
		for name, u := range map[string]string{"entered_url": sc.EnteredURL, "close_url": sc.CloseURL} {
			if u != "" && !strings.HasPrefix(u, base+"/v1/sessions/"+o.Session+"/") {
				t.Errorf("%s: %s %s does not carry the key", sc.Name, name, u)
			}
		}
		if strings.Contains(sc.URL+sc.OKURL+sc.HoldURL, key) {
			t.Errorf("%s: a fault listener's URL carries the key (the client under test gets it)", sc.Name)
		}
	}
	if list.Scenarios[1].EnteredURL == "" || list.Scenarios[2].CloseURL == "" {
		t.Fatalf("scenarios %+v", list.Scenarios)
	}
	// A fault listener's path for a session id guessed wrong is no
	// session's: the scenario's count is its client's alone.
	sc := list.Scenarios[0]
	guessed := strings.Replace(sc.URL, o.Session, "s1-"+strings.Repeat("0", 32), 1)
	if code, _ := ctl(t, "GET", guessed, nil, ""); code != 404 {
		t.Errorf("a guessed session's fault URL: %d", code)
	}
	for _, u := range []string{sc.URL, sc.OKURL} {
		if code, _ := ctl(t, "GET", u, nil, ""); code != 200 {
			t.Fatalf("GET %s: %d", u, code)
		}
	}
	var res Result
	if code := ctlDo(t, "POST", o.ReportURL, KitReport{Scenario: "ok", Outcome: &Outcome{Status: 200}, OK: &Outcome{Status: 200}}, &res); code != 200 {
		t.Fatalf("report: %d", code)
	}
	if res.Server.Requests != 1 {
		t.Errorf("ok: %d requests, want 1 (the guessed session's counted)", res.Server.Requests)
	}
}

// TestKeyInNoOutput: a kit that quotes CONNAUDIT_URL, key and all, in
// every text it sends (the client's name, version and configuration, a
// report's configuration, an error's message, not_configurable, skipped,
// done's error): no output of Run — text, JSON, JUnit, the outcome —
// shows the key. The kit's own answers may: it has the key.
func TestKeyInNoOutput(t *testing.T) {
	var text, js lockedBuffer
	junitPath := filepath.Join(t.TempDir(), "serve.xml")
	ctx, cancel := context.WithCancel(testkit.Bounded(t))
	defer cancel()
	urls := make(chan string, 1)
	type result struct {
		out *RunOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := Run(ctx, RunConfig{Text: &text, JSON: &js, JUnitFile: junitPath, Listening: func(url, _ string) { urls <- url }})
		done <- result{out, err}
	}()
	var url string
	select {
	case url = <-urls:
	case r := <-done:
		t.Fatal(r.err)
	}
	key := url[strings.LastIndex(url, "/k/")+3:]
	leak := "control " + url + "/v1/sessions failed"
	for _, rep := range []func(sc string) KitReport{
		func(sc string) KitReport {
			return KitReport{Scenario: sc, Config: leak, Outcome: &Outcome{Error: &ErrorOutcome{Kind: KindOther, Message: leak}}}
		},
		func(sc string) KitReport { return KitReport{Scenario: sc, NotConfigurable: leak} },
		func(sc string) KitReport { return KitReport{Scenario: sc, Skipped: leak} },
	} {
		var o Opened
		if code := ctlDo(t, "POST", url+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: leak,
			Client: Client{Name: "x " + key, Version: key, Config: leak}, Run: "^ok$"}, &o); code != 201 {
			t.Fatalf("open: %d", code)
		}
		ctlDo(t, "POST", o.ReportURL, rep("ok"), &Result{})
		ctlDo(t, "POST", o.DoneURL, Done{Error: leak}, &SessionReport{})
	}
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	jb, err := os.ReadFile(junitPath)
	if err != nil {
		t.Fatal(err)
	}
	outcome, _ := json.Marshal(r.out)
	for name, out := range map[string]string{"text": text.String(), "JSON": js.String(), "JUnit": string(jb), "outcome": string(outcome)} {
		if strings.Contains(out, key) {
			t.Errorf("the %s shows the key:\n%s", name, out)
		}
		if !strings.Contains(out, "x ") {
			t.Errorf("the %s shows no session:\n%s", name, out)
		}
	}
	if r.out.Sessions != 3 {
		t.Errorf("%d sessions", r.out.Sessions)
	}
}

// TestNumbersOutOfRange: every number a kit sends is range-checked with a
// 400 that says the range: no 309-digit time is printed, no timeout
// overflows a time.Duration into an immediate 408, and a timeout in range
// is waited for.
func TestNumbersOutOfRange(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var o Opened
	ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Client: Client{Name: "x"}, Run: "^(ok|cancel-in-handler)$"}, &o)
	var list Scenarios
	ctlDo(t, "GET", o.ScenariosURL, nil, &list)
	json := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct{ body, says string }{
		{`{"scenario":"ok","outcome":{"status":200},"elapsed_ms":1e308}`, "elapsed_ms 1e+308 is not a time in 0..3600000 ms"},
		{`{"scenario":"ok","outcome":{"status":200},"elapsed_ms":3600001}`, "elapsed_ms 3.6e+06 is not a time"},
		{`{"scenario":"ok","outcome":{"status":200,"elapsed_ms":1e300}}`, "outcome.elapsed_ms 1e+300 is not a time"},
		{`{"scenario":"ok","outcome":{"status":200},"ok":{"status":200,"elapsed_ms":-0.5}}`, "ok.elapsed_ms -0.5 is not a time"},
		{`{"scenario":"ok","outcome":{"status":200},"attempts":1001}`, "attempts 1001 is not in 0..1000"},
		{`{"scenario":"ok","outcome":{"status":200},"attempts":1e20}`, "malformed JSON"},
		{`{"scenario":"ok","outcome":{"status":1e10}}`, "malformed JSON"},
	} {
		code, body := ctl(t, "POST", o.ReportURL, json, c.body)
		if code != 400 || !strings.Contains(body, c.says) {
			t.Errorf("report %s: %d %s; want 400 saying %q", c.body, code, body, c.says)
		}
	}
	entered := list.Scenarios[1].EnteredURL
	for _, v := range []string{"Inf", "1e308", "NaN", "0", "-1", "10001", "x"} {
		code, body := ctl(t, "GET", entered+"&timeout_ms="+v, nil, "")
		if code != 400 || !strings.Contains(body, "is not a number of ms in (0, 10000]") {
			t.Errorf("timeout_ms=%s: %d %s", v, code, body)
		}
	}
	// In range, the wait is the one asked for: the long poll answers when
	// the handler is entered.
	answer := make(chan int, 1)
	go func() {
		code, _ := ctl(t, "GET", entered+"&timeout_ms=10000", nil, "")
		answer <- code
	}()
	reqCtx, cancel := context.WithCancel(testkit.Bounded(t))
	req, err := http.NewRequestWithContext(reqCtx, "GET", list.Scenarios[1].URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	called := make(chan struct{})
	go func() {
		defer close(called)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if code := <-answer; code != 200 {
		t.Errorf("timeout_ms=10000 with the handler entered: %d", code)
	}
	cancel() // as a kit does in cancel-when-entered
	<-called
	ctlDo(t, "POST", o.DoneURL, Done{}, &SessionReport{})
}

// TestEndedSessionsRemembered: a late call on a session that ended is
// told it is done (409), for the last maxEndedIDs sessions; the memory of
// them is bounded: older ones are forgotten (404).
func TestEndedSessionsRemembered(t *testing.T) {
	var e endings
	for i := range maxEndedIDs + 10 {
		e.remember(fmt.Sprint(i))
	}
	if len(e.set) != maxEndedIDs || len(e.ids) != maxEndedIDs {
		t.Fatalf("%d ids remembered, want %d", len(e.set), maxEndedIDs)
	}
	for i, want := range map[int]bool{0: false, 9: false, 10: true, maxEndedIDs + 9: true} {
		if e.ended(fmt.Sprint(i)) != want {
			t.Errorf("session %d remembered: %v, want %v", i, !want, want)
		}
	}
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	kit := servekit.New(srv.URL())
	o, err := kit.Open(testkit.Bounded(t), "x", "^ok$")
	if err != nil {
		t.Fatal(err)
	}
	if err := kit.Done(testkit.Bounded(t), o); err != nil {
		t.Fatal(err)
	}
	for u, body := range map[string]string{o.ReportURL: `{"scenario":"ok","outcome":{"status":200}}`, o.DoneURL: `{}`} {
		code, answer := ctl(t, "POST", u, map[string]string{"Content-Type": "application/json"}, body)
		if code != 409 || !strings.Contains(answer, o.Session+" is done") {
			t.Errorf("POST %s after done: %d %s", u[strings.LastIndex(u, "/"):], code, answer)
		}
	}
	if code, _ := ctl(t, "GET", o.ScenariosURL, nil, ""); code != 409 {
		t.Errorf("scenarios after done: %d", code)
	}
}

// stubListener is a net.Listener that only says its address.
type stubListener struct{ net.Listener }

func (stubListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero, Port: 4242} }

// TestAllowedHost: the Host header must name the server: a loopback
// address or localhost with its port, or the host -addr gave; an address
// on every interface takes any IP address, never a name.
func TestAllowedHost(t *testing.T) {
	for addr, cases := range map[string]map[string]bool{
		"127.0.0.1:0": {"127.0.0.1:4242": true, "localhost:4242": true, "LOCALHOST:4242": true, "[::1]:4242": true,
			"127.0.0.1:4243": false, "127.0.0.1": false, "attacker.example:4242": false, "192.168.1.5:4242": false, "": false},
		"box.lan:4242": {"box.lan:4242": true, "localhost:4242": true, "other.lan:4242": false, "192.168.1.5:4242": false},
		"0.0.0.0:4242": {"192.168.1.5:4242": true, "[fe80::1]:4242": true, "attacker.example:4242": false},
	} {
		s := &Server{cfg: config{addr: addr}, ctl: stubListener{}}
		for host, want := range cases {
			if got := s.allowedHost(host); got != want {
				t.Errorf("-addr %s, Host %q: allowed %v, want %v", addr, host, got, want)
			}
		}
	}
}

// TestJUnitFile: the JUnit file is written beside its target and renamed
// over it at the end (the target as it was until then, no temporary file
// left); a file that is not regular is written in place; a directory is
// refused at once.
func TestJUnitFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "serve.xml")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	jf, err := createJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := jf.add(&SessionReport{Client: Client{Name: "x"}, Results: []Result{{Name: "ok", Pass: true}}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the target changed before the end: %q", b)
	}
	if err := jf.commit(); err != nil {
		t.Fatal(err)
	}
	jf.discard()
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	entries, _ := os.ReadDir(dir)
	if !strings.Contains(string(b), `<testsuite name="connaudit serve: x " tests="1"`) || st.Mode().Perm() != 0o600 || len(entries) != 1 {
		t.Errorf("after the end: %q, mode %v, %d files", b, st.Mode().Perm(), len(entries))
	}
	if _, err := createJUnit(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	jf, err = createJUnit(os.DevNull)
	if err != nil || jf.tmp {
		t.Fatalf("%s: %v, temporary %v", os.DevNull, err, jf != nil && jf.tmp)
	}
	jf.add(&SessionReport{})
	if err := jf.commit(); err != nil {
		t.Error(err)
	}
}

// TestConnectHangOutOfOrder: a kit that takes connect-hang out of order
// (after a scenario served later), with a client that has no connect
// bound, is not left hanging until the kernel gives up (127 s): once its
// session is silent, the server closes the full listener, and the connect's
// next SYN is refused; the verdict is "unbounded".
func TestConnectHangOutOfOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a SYN's retransmission (about 15 s)")
	}
	beside(t)
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^(connect-hang|connect-refused)$`)
	if len(list) != 2 || list[0].Name != "connect-hang" {
		t.Fatalf("offered %+v", list)
	}
	// The later scenario first.
	refused := list[1]
	var d net.Dialer
	if _, err := d.Dial("tcp", strings.TrimPrefix(refused.URL, "http://")[:strings.Index(strings.TrimPrefix(refused.URL, "http://"), "/")]); err == nil {
		t.Fatal("the closed port answered")
	}
	one := 1
	ok := okVia(t, refused.OKURL)
	ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: refused.Name, Attempts: &one, OK: &ok,
		Outcome: &Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: "refused"}}}, &Result{})
	// Then connect-hang, with no bound of the client's: the dial must
	// end, the server's guard ending it, within a bound far below the
	// kernel's own (127 s).
	hang := list[0]
	host := strings.TrimPrefix(hang.URL, "http://")
	host = host[:strings.Index(host, "/")]
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		c, err := d.Dial("tcp", host)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	var dialErr error
	select {
	case dialErr = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the connect still hangs 40s on: the server's guard did not end it")
	}
	t.Logf("the connect ended after %v: %v", time.Since(start).Round(time.Millisecond), dialErr)
	ok = okVia(t, hang.OKURL)
	var res Result
	ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: hang.Name, Attempts: &one, OK: &ok,
		Outcome: &Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: "refused after hanging"}}}, &res)
	ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
	if res.Pass || !res.Unbounded {
		t.Fatalf("connect-hang with no connect bound: pass %v, unbounded %v, %q", res.Pass, res.Unbounded, res.Mismatches)
	}
}

// okVia sends GET /ok with a client of its own.
func okVia(t *testing.T, url string) Outcome {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return Outcome{Status: resp.StatusCode}
}
