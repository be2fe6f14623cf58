package viztest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/servekit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/probe"
	"github.com/connaudit/connaudit/serve"
	"github.com/connaudit/connaudit/viztest/browser"
)

var docs = flag.String("docs", "", "write the screenshots docs/ shows to this directory")

// openBrowser starts headless Chromium, or skips saying how to install it.
func openBrowser(t *testing.T) *browser.Browser {
	t.Helper()
	path, err := browser.Path()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	b, err := browser.Open(ctx, path, 1400, 900)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// check loads page in b and checks it there: no console error, a lane per
// connection, each closed lane's reason as the JSON says (want: by id).
func check(t *testing.T, b *browser.Browser, page string, conns int, want map[uint64]string) {
	t.Helper()
	if _, err := b.Load(page); err != nil {
		t.Fatal(err)
	}
	lanes, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("g.lane").length`))
	if err != nil {
		t.Fatal(err)
	}
	if lanes != conns {
		t.Errorf("%d lanes, want %d: one per connection of the JSON", lanes, conns)
	}
	shown, err := chromedp.Run(b.Ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(
		[...document.querySelectorAll("g.lane")].filter(g => g.querySelector(".reason")).
		map(g => [g.dataset.conn, g.querySelector(".reason").textContent]))`))
	if err != nil {
		t.Fatal(err)
	}
	for id, reason := range want {
		if got := shown[fmt.Sprint(id)]; got != reason {
			t.Errorf("connection #%d: the page shows close reason %q, the JSON says %q", id, got, reason)
		}
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// screenshot writes the page's first screen to docs/name, with -docs.
func screenshot(t *testing.T, b *browser.Browser, name string) {
	t.Helper()
	if *docs == "" {
		return
	}
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*docs, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startNginx starts nginx on loopback, closing each connection after 20
// requests, or skips saying how to install it.
func startNginx(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/nginx"); err2 != nil {
			t.Skip("nginx not installed: run .ci/services")
		}
		bin = "/usr/sbin/nginx"
	}
	dir := t.TempDir()
	addr := testserver.FreePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
	access_log off;
	keepalive_requests 20;
	client_body_temp_path %[2]s/b; proxy_temp_path %[2]s/p; fastcgi_temp_path %[2]s/f;
	uwsgi_temp_path %[2]s/u; scgi_temp_path %[2]s/s;
	server { listen %[3]s; location / { return 200 "ok"; } }
}
`, user, dir, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://" + addr + "/"
	// Ready when it answers: bounded, each try a dial that fails at once
	// until nginx listens.
	for i := 0; ; i++ {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return url
		}
		if i == 200 {
			t.Fatalf("nginx did not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // a process starting: nothing to wait on but its port
	}
}

// TestProbePage probes nginx as connaudit probe -html does and checks the
// page in Chromium against the report's JSON.
func TestProbePage(t *testing.T) {
	url := startNginx(t)
	b := openBrowser(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []picture.Request
	rep, err := probe.Run(t.Context(), req, probe.Requests(100), probe.Concurrency(2),
		probe.OnProgress(func(p probe.Progress) {
			if p.Timeline != nil {
				reqs = append(reqs, picture.Attempts(p.Timeline)...)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// What the JSON says, read back from it.
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Connections []struct {
			ID          uint64 `json:"id"`
			CloseReason string `json:"close_reason"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{}
	closed := 0
	for _, c := range back.Connections {
		if c.CloseReason != "" {
			want[c.ID] = c.CloseReason
			closed++
		}
	}
	if closed < 4 {
		t.Fatalf("%d connections closed, want at least 4: nginx closes each after 20 requests", closed)
	}
	page := filepath.Join(t.TempDir(), "probe.html")
	write(t, page, picture.Page{Title: "connaudit probe", Sets: []picture.Set{pictures.Probe(rep, reqs, 0)}})
	check(t, b, page, len(back.Connections), want)
	screenshot(t, b, "picture-probe-nginx.png")
}

// TestScenarioPage runs scenarios as connaudit scenarios -html does and
// checks the page in Chromium: a set per scenario, a lane per connection
// their attempts were sent on.
func TestScenarioPage(t *testing.T) {
	b := openBrowser(t)
	sc, err := audit.Select(audit.Catalogue(), `^(ok|reset|close-mid-body|retry/503)$`, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(t.Context(), sc)
	sets := pictures.Scenarios(rep)
	conns := 0
	for _, s := range sets {
		conns += len(s.Conns)
	}
	page := filepath.Join(t.TempDir(), "scenarios.html")
	write(t, page, picture.Page{Title: "connaudit scenarios", Sets: sets})
	check(t, b, page, conns, nil)
	n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("section.set").length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(sc) {
		t.Errorf("%d sets, want one per scenario: %d", n, len(sc))
	}
	screenshot(t, b, "picture-scenarios.png")
}

// TestServePage runs a session of scenario reset under serve as connaudit
// serve -html draws it, and checks the page in Chromium against the
// session's JSON: a lane per connection the server saw, each closed one's
// how (fin, rst) as its reason. The server resets the connection and
// knows it before the verdict, so that one close at least is shown.
func TestServePage(t *testing.T) {
	b := openBrowser(t)
	var rep *serve.SessionReport
	srv, err := serve.New(serve.OnSessionEnd(func(r *serve.SessionReport) { rep = r }))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	kit := servekit.New(srv.URL())
	o, err := kit.Open(t.Context(), "go", "^reset$")
	if err != nil {
		t.Fatal(err)
	}
	var list serve.Scenarios
	if _, err := kit.Get(t.Context(), o.ScenariosURL, &list); err != nil || len(list.Scenarios) != 1 {
		t.Fatalf("scenarios: %v %+v", err, list)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	sc := list.Scenarios[0]
	outcome := serve.Outcome{Status: 200}
	if resp, err := (&http.Client{Transport: tr}).Get(sc.URL); err != nil {
		outcome = serve.Outcome{Error: &serve.ErrorOutcome{Kind: serve.KindConnection, Message: err.Error()}}
	} else {
		resp.Body.Close()
	}
	if _, err := kit.Post(t.Context(), o.ReportURL, serve.KitReport{Scenario: sc.Name, Outcome: &outcome}, nil); err != nil {
		t.Fatal(err)
	}
	if err := kit.Done(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if rep == nil {
		t.Fatal("no report: the kit's done is answered once OnSessionEnd returned")
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []struct {
			Server struct {
				Connections []struct {
					ID  uint64 `json:"id"`
					How string `json:"how"`
				} `json:"connections"`
			} `json:"server"`
		} `json:"results"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{}
	conns, reset := 0, 0
	for _, r := range back.Results {
		for _, c := range r.Server.Connections {
			conns++
			if c.How != "" {
				want[c.ID] = c.How
			}
			if c.How == "rst" {
				reset++
			}
		}
	}
	if reset == 0 {
		t.Fatalf("no connection reset, as the server does in scenario reset: %s", js)
	}
	page := filepath.Join(t.TempDir(), "serve.html")
	write(t, page, picture.Page{Title: "connaudit serve", Sets: pictures.Session(rep)})
	check(t, b, page, conns, want)
}

func write(t *testing.T, path string, p picture.Page) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := picture.WriteHTML(f, p); err != nil {
		t.Fatal(err)
	}
}
