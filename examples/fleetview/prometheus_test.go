package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	rulesPath     = "../../promconnaudit/monitoring/connaudit.rules.yml"
	dashboardPath = "../../promconnaudit/monitoring/dashboard.json"
)

// binary returns the path of a program of Prometheus's, or skips the test.
func binary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: run .ci/services (apt-get install prometheus) to scrape fleetview with a real Prometheus", name)
	}
	return p
}

// process is a program the test started, stopped at its end.
type process struct {
	cmd   *exec.Cmd
	lines chan string // its standard error, line by line, closed at EOF
	done  chan error
}

// startProcess starts bin with args, its standard error read line by
// line; the test's cleanup stops it (SIGTERM, then SIGKILL after 10s) and
// waits for it.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads any more: drop
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
		for range p.lines {
		}
	})
	return p
}

// await returns the first submatch of re in the process's standard error,
// within ctx; lines seen go to the test log when it fails.
func (p *process) await(t *testing.T, ctx context.Context, re *regexp.Regexp) string {
	t.Helper()
	var seen []string
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s ended before %q:\n%s", p.cmd.Path, re, strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			if m := re.FindStringSubmatch(line); m != nil {
				return m[len(m)-1]
			}
		case <-ctx.Done():
			t.Fatalf("%s: no %q: %v:\n%s", p.cmd.Path, re, ctx.Err(), strings.Join(seen, "\n"))
		}
	}
}

// scrapeProxy serves GET /metrics from target to Prometheus, and hands
// each scrape's families to the test as it is served.
func scrapeProxy(t *testing.T, target string) (string, <-chan map[string]float64) {
	t.Helper()
	scrapes := make(chan map[string]float64, 256)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target+"/metrics", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Accept", "text/plain")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.Write(body)
		select {
		case scrapes <- totals(body):
		default:
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return srv.URL, scrapes
}

// totals adds up each family's samples in an exposition (a histogram by
// its count).
func totals(body []byte) map[string]float64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	out := map[string]float64{}
	if err != nil {
		return out
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// query runs an instant PromQL query on the Prometheus at base and
// returns its samples.
func query(t *testing.T, ctx context.Context, base, q string) []sample {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("%s: %s %s", q, r.Status, r.Error)
	}
	return r.Data.Result
}

// sample is one sample of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s sample) float(t *testing.T) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPrometheusScrapesFleetview builds fleetview (without the race
// detector, whose cost would be measured as waits), runs it under load
// with faults, has a real Prometheus (127.0.0.1 only, a temporary
// storage) scrape it with promconnaudit's rules, and checks with PromQL
// over the HTTP API: a median wait below 5ms on loopback, a series per
// upstream host, and every query of the dashboard and of the recording
// rules answering.
func TestPrometheusScrapesFleetview(t *testing.T) {
	prom := binary(t, "prometheus")
	promtool := binary(t, "promtool")
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "config", "prometheus.yml").CombinedOutput(); err != nil {
		t.Fatalf("the prometheus.yml beside fleetview: %v\n%s", err, out)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "fleetview")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fv := startProcess(t, bin, "-addr", "127.0.0.1:0", "-load", "200", "-concurrency", "4", "-faults")
	addr := fv.await(t, ctx, regexp.MustCompile(`serving on (http://127\.0\.0\.1:\d+)`))
	target, scrapes := scrapeProxy(t, addr)

	rules, err := filepath.Abs(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: fleetview
    static_configs:
      - targets: [%q]
`, rules, strings.TrimPrefix(target, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:0")
	promURL := "http://" + p.await(t, ctx, regexp.MustCompile(`msg="Listening on" address=(127\.0\.0\.1:\d+)`))
	p.await(t, ctx, regexp.MustCompile(`Server is ready to receive web requests`))

	// Scrapes until one shows traffic to both hosts, a hidden retry the
	// server may have processed and a body left open; then two more, so
	// that what that one saw is stored (Prometheus commits a scrape
	// before it starts the next).
	var seen map[string]float64
	for n := 0; ; n++ {
		select {
		case seen = <-scrapes:
		case <-ctx.Done():
			t.Fatalf("after %d scrapes: %v; last %v", n, ctx.Err(), seen)
		}
		if seen["connaudit_pool_requests_total"] >= 500 && seen["connaudit_pool_hidden_retries_possibly_processed_total"] >= 1 &&
			seen["connaudit_pool_open_bodies"] >= 1 && seen["connaudit_pool_wait_duration_seconds"] >= 20 {
			break
		}
	}
	for range 2 {
		select {
		case <-scrapes:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}

	// The wait, by quantile, in the pool's buckets.
	quantile := func(q float64) float64 {
		s := query(t, ctx, promURL, fmt.Sprintf(
			`histogram_quantile(%v, sum by (le) (rate(connaudit_pool_wait_duration_seconds_bucket{job="fleetview",pool="upstream"}[1m])))`, q))
		if len(s) != 1 {
			t.Fatalf("p%v of the wait: %v", q*100, s)
		}
		return s[0].float(t)
	}
	p50, p99 := quantile(0.5), quantile(0.99)
	t.Logf("wait for a connection on loopback: p50 %.6fs, p99 %.6fs", p50, p99)
	if !(p50 > 0 && p50 < 0.005) {
		t.Errorf("the median wait on loopback is %vs, not between 0 and 5ms", p50)
	}

	// Buckets that resolve a loopback wait: seven bounds under 5ms.
	fine := map[string]bool{}
	for _, s := range query(t, ctx, promURL, `connaudit_pool_wait_duration_seconds_bucket{job="fleetview"}`) {
		if le, err := strconv.ParseFloat(s.Metric["le"], 64); err == nil && le < 0.005 {
			fine[s.Metric["le"]] = true
		}
	}
	if len(fine) != 7 {
		t.Errorf("%d bucket bounds under 5ms, want 7: %v", len(fine), fine)
	}

	// A series per upstream host, each with its requests.
	hosts := query(t, ctx, promURL, `connaudit_pool_requests_total{job="fleetview",pool="upstream"}`)
	ports := map[string]bool{}
	for _, s := range hosts {
		if s.Metric["server_address"] != "127.0.0.1" || s.Metric["server_port"] == "" || s.float(t) < 100 {
			t.Errorf("host series %v", s)
		}
		ports[s.Metric["server_port"]] = true
	}
	if len(ports) != 2 {
		t.Errorf("%d host series, want the two upstreams: %v", len(ports), hosts)
	}
	if s := query(t, ctx, promURL, `sum(connaudit_pool_hidden_retries_possibly_processed_total{job="fleetview"})`); len(s) != 1 || s[0].float(t) < 1 {
		t.Errorf("hidden retries possibly processed: %v", s)
	}
	if s := query(t, ctx, promURL, `target_info{job="fleetview",service_name="fleetview"}`); len(s) != 1 {
		t.Errorf("service.name: %v", s)
	}
	churn := query(t, ctx, promURL, `sum(rate(connaudit_pool_dials_total[1m])) / sum(rate(connaudit_pool_requests_total[1m]))`)
	if len(churn) == 1 {
		t.Logf("dials per request with net/http's 2 idle connections per host and 4 requests at once: %.3f", churn[0].float(t))
	}

	// Every query of the dashboard, and every recording rule's, answers
	// over these series: each names series that exist.
	var exprs []string
	dash, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`"expr": "((?:[^"\\]|\\.)*)"`).FindAllSubmatch(dash, -1) {
		var e string
		if err := json.Unmarshal([]byte(`"`+string(m[1])+`"`), &e); err != nil {
			t.Fatal(err)
		}
		exprs = append(exprs, e)
	}
	ruleText, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, recordingExprs(string(ruleText))...)
	if len(exprs) < 20 {
		t.Fatalf("%d queries found in the dashboard and the rules", len(exprs))
	}
	vars := strings.NewReplacer(`$job`, `fleetview`, `$pool`, `.*`, `$host`, `.*`, `$__rate_interval`, `1m`)
	for _, e := range exprs {
		if len(query(t, ctx, promURL, vars.Replace(e))) == 0 {
			t.Errorf("no series for %s", e)
		}
	}
}

// recordingExprs returns the expressions of the recording rules in a rules
// file: the line after each "- record:", or the block under it.
func recordingExprs(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "- record:") {
			continue
		}
		e, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "expr:")
		if !ok {
			continue
		}
		if e = strings.TrimSpace(e); e != "|" {
			out = append(out, e)
			continue
		}
		indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
		var block []string
		for _, l := range lines[i+2:] {
			if strings.TrimSpace(l) == "" || len(l)-len(strings.TrimLeft(l, " ")) <= indent {
				break
			}
			block = append(block, l)
		}
		out = append(out, strings.Join(block, "\n"))
	}
	return out
}
