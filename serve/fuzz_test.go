package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzControlAPI: any body on any control endpoint of an open session is
// answered with a status below 500 and a JSON object, never a panic or a
// hang.
func FuzzControlAPI(f *testing.F) {
	for _, seed := range []string{
		`{"scenario":"ok","outcome":{"status":200},"ok":{"status":200}}`,
		`{"scenario":"ok","outcome":{"error":{"kind":"timeout","message":"x"}},"elapsed_ms":1e308}`,
		`{"scenario":"ok","not_configurable":"no"}`, `{"protocol":"connaudit.serve/v1","client":{"name":"x"}}`,
		`{"scenario":"ok","attempts":1001,"outcome":{"status":200}}`, `[]`, `null`, `{"a":`, "\x00\xff",
		`{"scenario":"ok","outcome":{"status":99}}`, strings.Repeat(`{"x":`, 1000),
	} {
		for e := range uint8(3) {
			f.Add(e, seed)
		}
	}
	srv, err := New()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h := srv.routes()
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		endpoint := []string{"reports", "done", "open"}[which%3]
		open := httptest.NewRecorder()
		h.ServeHTTP(open, httptest.NewRequest("POST", "/v1/sessions",
			strings.NewReader(`{"protocol":"connaudit.serve/v1","client":{"name":"f"},"run":"^ok$"}`)))
		var o Opened
		if err := json.Unmarshal(open.Body.Bytes(), &o); err != nil || o.Session == "" {
			t.Skip("no session (64 are open)")
		}
		path := "/v1/sessions/" + o.Session + "/" + endpoint
		if endpoint == "open" {
			path = "/v1/sessions"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
		}
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %q: not a JSON object: %s", path, body, rec.Body.String())
		}
		done := httptest.NewRecorder()
		h.ServeHTTP(done, httptest.NewRequest("POST", "/v1/sessions/"+o.Session+"/done", strings.NewReader(`{}`)))
		if done.Code != http.StatusOK && done.Code != http.StatusConflict {
			t.Fatalf("done: %d", done.Code)
		}
	})
}
