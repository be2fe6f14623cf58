package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKitSecretsMasked: a kit whose names, configuration, reason and
// error quote secrets in each form a client may write them, and characters
// that reorder or hide text, gets a verdict whose JSON and text show none
// of them.
func TestKitSecretsMasked(t *testing.T) {
	forms := strings.Join([]string{
		"a\u202eb\u2066c\u200bd", `{"Authorization": "Bearer Zq7s1"}`, `{'Authorization': 'Bearer Zq7s2'}`,
		"token Bearer Zq7s4", "password=Zq7s5", "wss://user:Zq7s6@host/", "https%3A%2F%2Fuser%3AZq7s7%40host%2F",
		"Basic dXNlcjpacTdzOA==", "xhttps://u:Zq7s9@h/?k=Zq7s10",
		"X-Api-Key: Zq7s3", // last: the rest of its line is its value
	}, " ")
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var opened Opened
	call(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "kit password=Zq7k\u202e",
		Client: Client{Name: "client Bearer Zq7n\u2066", Version: "1 token=Zq7v\u200b",
			Config: "{'Authorization': 'Bearer Zq7c1'} wss://user:Zq7c2@host/ X-Api-Key: Zq7c3"}}, &opened)
	var list Scenarios
	call(t, "GET", opened.ScenariosURL, nil, &list)
	if len(list.Scenarios) == 0 {
		t.Fatal("no scenario offered")
	}
	call(t, "POST", opened.ReportURL, KitReport{Scenario: list.Scenarios[0].Name, NotConfigurable: forms, Config: forms}, nil)
	var rep SessionReport
	b := call(t, "POST", opened.DoneURL, Done{Error: forms}, &rep)
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if rep.NotConfigurable != 1 || !strings.Contains(text.String(), "X-Api-Key: REDACTED") {
		t.Fatalf("the report does not show the reason:\n%s", text.String())
	}
	for name, out := range map[string]string{"JSON": string(b), "text": text.String()} {
		if strings.Contains(out, "Zq7") || strings.Contains(out, "dXNlcjpacTdzOA") {
			t.Errorf("the %s report shows a secret:\n%s", name, out)
		}
		if strings.ContainsAny(out, "\u202e\u2066\u200b") {
			t.Errorf("the %s report shows a bidirectional or invisible character:\n%q", name, out)
		}
	}
}

// call sends body as JSON to the control API and decodes its answer into
// out; it returns the answer.
func call(t *testing.T, method, url string, body, out any) []byte {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s %v", method, url, resp.StatusCode, b, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, url, b, err)
		}
	}
	return b
}
