package promconnaudit_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/promconnaudit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// The rules, their tests and the dashboard, in monitoring/.
const (
	rulesFile     = "monitoring/connaudit.rules.yml"
	rulesTestFile = "monitoring/connaudit.rules_test.yml"
	dashboardFile = "monitoring/dashboard.json"
)

var (
	stringLit  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	grafanaVar = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	matchers   = regexp.MustCompile(`\{[^{}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	ident      = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelVals  = regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`)
	recordName = regexp.MustCompile(`(?m)^\s*-?\s*record:\s*(\S+)\s*$`)
	ruleExpr   = regexp.MustCompile(`(?m)^\s*expr:\s*(\|)?(.*)$`)
)

// promqlKeywords are the words of PromQL that are neither series nor
// functions.
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true}

// seriesNames returns the series names a PromQL expression (or a Grafana
// query with its $variables) reads: what is left once strings, label
// matchers, ranges, grouping clauses, functions and keywords are taken
// out. A Grafana label_values(metric…, label) query reads metric.
func seriesNames(expr string) []string {
	if m := labelVals.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	e := stringLit.ReplaceAllString(expr, `""`)
	e = grafanaVar.ReplaceAllString(e, "")
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range ident.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.") {
			continue // a number's exponent or a duration's unit
		}
		if promqlKeywords[word] || strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(") {
			continue
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	return names
}

func TestSeriesNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (server_address, le) (rate(connaudit_pool_wait_duration_seconds_bucket{pool=~"$pool",job="a{b}"}[$__rate_interval]))`: {"connaudit_pool_wait_duration_seconds_bucket"},
		`connaudit:dials_per_request:ratio_rate5m > 0.1 and connaudit:requests:rate5m > 1e-3`:                                         {"connaudit:dials_per_request:ratio_rate5m", "connaudit:requests:rate5m"},
		`min_over_time(x_total[15m]) > min_over_time(x_total[15m] offset 15m)`:                                                        {"x_total"},
		`histogram_quantile(0.99, sum(rate(a_bucket[5m])) by (le)) / on (pool) group_left (server_port) b`:                            {"a_bucket", "b"},
		`label_values(connaudit_pool_requests_total{job=~"$job"}, pool)`:                                                              {"connaudit_pool_requests_total"},
		`sum without (instance) (up)`: {"up"},
	} {
		require.Equal(t, want, seriesNames(expr), expr)
	}
}

// exportedNames returns the series names a real collector exposes after a
// run with faults (closes of several reasons, a hidden retry, a body held
// open), each histogram by its _bucket, _sum and _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	c, err := promconnaudit.NewCollector(faultRun(t, true), "api")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
			continue
		}
		names[f.GetName()] = true
	}
	require.Len(t, families, 19, "every family exposed")
	return names
}

// ruleExprs returns the expressions of the rules in the file text, each
// on one line or in a block (expr: |).
func ruleExprs(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		m := ruleExpr.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if m[1] == "" {
			out = append(out, strings.TrimSpace(m[2]))
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var block []string
		for _, b := range lines[i+1:] {
			if strings.TrimSpace(b) != "" && len(b)-len(strings.TrimLeft(b, " ")) <= indent {
				break
			}
			block = append(block, b)
		}
		out = append(out, strings.Join(block, "\n"))
	}
	return out
}

// dashboardQueries returns every query of the dashboard: each panel's
// targets' expressions and each template variable's query.
func dashboardQueries(t *testing.T, raw []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string          `json:"type"`
				Definition string          `json:"definition"`
				Query      json.RawMessage `json:"query"` // a string, or {"query": …}
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			var q struct {
				Query string `json:"query"`
			}
			require.NoError(t, json.Unmarshal(v.Query, &q))
			out = append(out, q.Query, v.Definition)
		}
	}
	return out
}

// TestDashboardAndRulesReadRealSeries: every series the dashboard's
// queries and the rules' expressions read is one a real collector
// exposes, or one the rules record.
func TestDashboardAndRulesReadRealSeries(t *testing.T) {
	known := exportedNames(t)
	rules, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	for _, m := range recordName.FindAllStringSubmatch(string(rules), -1) {
		known[m[1]] = true
	}
	dash, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	queries := dashboardQueries(t, dash)
	require.Greater(t, len(queries), 15)
	exprs := ruleExprs(string(rules))
	require.Len(t, exprs, 11, "one per rule")
	for _, q := range append(queries, exprs...) {
		names := seriesNames(q)
		require.NotEmpty(t, names, q)
		for _, n := range names {
			require.True(t, known[n], "%s reads %s, which nothing exposes or records", q, n)
		}
	}
}

// promtool returns the path of Prometheus's promtool, or skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed: run .ci/services (apt-get install prometheus) to test the rules in Prometheus")
	}
	return p
}

// runPromtool runs promtool's rule tests on a copy of the rules in which
// edit, if any, replaced old with new, and returns its output and error.
func runPromtool(t *testing.T, bin, old, new string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	tests, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	if old != "" {
		require.Equal(t, 1, strings.Count(string(rules), old), old)
		rules = []byte(strings.Replace(string(rules), old, new, 1))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(rulesFile)), rules, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(rulesTestFile)), tests, 0o644))
	out, err := exec.CommandContext(bounded(t), bin, "test", "rules", filepath.Join(dir, filepath.Base(rulesTestFile))).CombinedOutput()
	return string(out), err
}

// TestRulesInPromtool runs the rules' tests in Prometheus's own promtool,
// then proves they fail when a rule breaks: an expression that does not
// parse, one that reads a series no exporter has, a threshold moved, an
// alert's wait shortened.
func TestRulesInPromtool(t *testing.T) {
	bin := promtool(t)
	out, err := runPromtool(t, bin, "", "")
	require.NoError(t, err, out)
	require.Contains(t, out, "SUCCESS")
	for _, c := range []struct{ name, old, new, says string }{
		{"parse error", "(rate(connaudit_pool_dials_total[5m]))", "(rate(connaudit_pool_dials_total[5m])", "parse error"},
		{"a series no exporter has", "(rate(connaudit_pool_dials_total[5m]))", "(rate(connaudit_pool_dial_total[5m]))", "ConnauditConnectionChurn"},
		{"a threshold moved", "p99_5m > 0.25", "p99_5m > 0.5", "ConnauditRequestsWaitForConnections"},
		{"a wait too short to count", "for: 30m", "for: 5m", "ConnauditOpenBodiesGrowing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runPromtool(t, bin, c.old, c.new)
			require.Error(t, err, out)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			require.Contains(t, out, c.says)
		})
	}
}
