package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var update = flag.Bool("update", false, "rewrite the table in ../docs/retry.md")

const (
	docPath    = "../docs/retry.md"
	tableStart = "<!-- compat table: begin -->\n"
	tableEnd   = "<!-- compat table: end -->\n"
)

// TestTable runs every client on every contract once, then checks the
// JSON form's shape and that the table committed in docs/retry.md is the
// one this run gives (go test -run TestTable -update rewrites it).
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
	if len(decoded.Clients) < 4 {
		t.Fatalf("%d clients, want at least 4", len(decoded.Clients))
	}
	want := []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "W1", "W2", "W3", "W4", "H1", "P1"}
	for _, c := range decoded.Clients {
		if c.Name == "" || c.Version == "" || c.Version == "unknown" {
			t.Errorf("client %q version %q", c.Name, c.Version)
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
	// The reference holds every contract.
	for _, r := range results[0].Results {
		if !r.Pass {
			t.Errorf("connaudit retry: %s: %s %v", r.ID, r.Observed, r.Verdicts)
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
