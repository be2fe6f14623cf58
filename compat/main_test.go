package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

var update = flag.Bool("update", false, "rewrite the table in ../docs/retry.md")

const (
	docPath    = "../docs/retry.md"
	tableStart = "<!-- compat table: begin -->\n"
	tableEnd   = "<!-- compat table: end -->\n"
)

// TestTable runs every library in its two rows on every contract once,
// then checks the JSON form's shape, what the issue measured of
// go-retryablehttp's rows, that every ✗ of a configured row says why, that
// the text fits 100 columns, and that the table committed in docs/retry.md
// is the one this run gives (go test -run TestTable -update rewrites it).
func TestTable(t *testing.T) {
	results, err := auditAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	if err := enc.Encode(struct {
		Clients []clientResult `json:"clients"`
	}{results}); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Clients []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Row     string `json:"row"`
			How     string `json:"how"`
			Results []struct {
				ID       string `json:"id"`
				Pass     *bool  `json:"pass"`
				Observed string `json:"observed"`
			} `json:"results"`
		} `json:"clients"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.Clients) != 2*len(clients()) {
		t.Fatalf("%d rows, want 2 per library (%d)", len(decoded.Clients), 2*len(clients()))
	}
	want := []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "W1", "W2", "W3", "W4", "H1", "H2", "P1"}
	for i, c := range decoded.Clients {
		row := []string{rowDefaults, rowConfigured}[i%2]
		if c.Name == "" || c.Version == "" || c.Version == "unknown" || c.Row != row || c.How == "" {
			t.Errorf("row %d: %q %q %q %q, want row %q", i, c.Name, c.Version, c.Row, c.How, row)
		}
		var ids []string
		for _, r := range c.Results {
			ids = append(ids, r.ID)
			if r.Pass == nil || r.Observed == "" {
				t.Errorf("%s %s: pass %v, observed %q", c.Name, r.ID, r.Pass, r.Observed)
			}
		}
		if strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("%s: results %v, want %v", c.Name, ids, want)
		}
	}
	row := func(name, kind string) map[string]contractResult {
		out := map[string]contractResult{}
		for _, r := range results {
			if r.Name == name && r.Row == kind {
				for _, cr := range r.Results {
					out[cr.ID] = cr
				}
			}
		}
		return out
	}
	// The reference, as configured, holds every contract.
	for id, r := range row("connaudit retry", rowConfigured) {
		if !r.Pass {
			t.Errorf("connaudit retry: %s: %s %v", id, r.Observed, r.Verdicts)
		}
	}
	// go-retryablehttp at its defaults, as measured; configured, it holds
	// them all.
	d := row("go-retryablehttp", rowDefaults)
	for id, want := range map[string]string{"A2": "✓3", "A3": "✗5", "A4": "✓1", "A5": "✗5", "A6": "✗∞", "W4": "✗2"} {
		if got := cell(d[id]); got != want {
			t.Errorf("go-retryablehttp defaults %s: %s (%s), want %s", id, got, d[id].Observed, want)
		}
	}
	if !strings.Contains(d["A3"].Error, "giving up after 5 attempt(s)") || d["W4"].Observed != "2/2 w2 200" {
		t.Errorf("go-retryablehttp defaults: A3 error %q, W4 %q", d["A3"].Error, d["W4"].Observed)
	}
	for id, r := range row("go-retryablehttp", rowConfigured) {
		if !r.Pass {
			t.Errorf("go-retryablehttp configured: %s: %s %v", id, r.Observed, r.Verdicts)
		}
	}
	// A configured row's ✗ says why the library cannot hold it.
	for _, r := range results {
		for _, cr := range r.Results {
			if r.Row == rowConfigured && !cr.Pass && cr.Why == "" && cr.NotConfigurable == "" {
				t.Errorf("%s configured: %s is broken and no reason is given: %s %v", r.Name, cr.ID, cr.Observed, cr.Verdicts)
			}
		}
	}
	for _, l := range strings.Split(tableText(results), "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("a line of %d columns: %s", n, l)
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
	got, table := string(doc[i+len(tableStart):j]), markdown(results)
	if got == table {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(tableStart)]...), table...), doc[j:]...)
		if err := os.WriteFile(docPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the table in %s is stale (cd compat && go test -run TestTable -update); this run gives:\n%s", docPath, table)
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-nope"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"extra"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
		t.Errorf("stderr: %s", errOut.String())
	}
}
