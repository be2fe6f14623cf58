// Package servekit is the least kit of connaudit serve's protocol
// (docs/serve.md) in Go, for the tests and the benchmarks: it opens
// sessions on the "ok" scenario, passes them or leaves them failed, and
// says done. Like every kit it speaks only the protocol: it imports nothing
// of serve. It is not API.
package servekit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Kit talks to the control API at URL (CONNAUDIT_URL).
type Kit struct {
	URL string
	// Control sends the control requests; the client under test is a new
	// one per session.
	Control *http.Client
}

// New returns a kit for the control API at url.
func New(url string) *Kit {
	return &Kit{URL: url, Control: &http.Client{Timeout: 30 * time.Second}}
}

// Post sends body as JSON to url and decodes the answer into out (if not
// nil); it returns the status.
func (k *Kit) Post(ctx context.Context, url string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	return k.do(req, out)
}

// Get sends a GET to url and decodes the answer into out (if not nil).
func (k *Kit) Get(ctx context.Context, url string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	return k.do(req, out)
}

func (k *Kit) do(req *http.Request, out any) (int, error) {
	resp, err := k.Control.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			// Not the URL: CONNAUDIT_URL's path holds the server's key.
			return resp.StatusCode, fmt.Errorf("servekit: %s: %d: %v", req.Method, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, nil
}

// Opened is the answer to a session's opening.
type Opened struct {
	Session      string `json:"session"`
	ScenariosURL string `json:"scenarios_url"`
	ReportURL    string `json:"report_url"`
	DoneURL      string `json:"done_url"`
}

// Open opens a session of the client name on the scenarios run selects.
func (k *Kit) Open(ctx context.Context, name, run string) (Opened, error) {
	var o Opened
	code, err := k.Post(ctx, k.URL+"/v1/sessions", map[string]any{"protocol": "connaudit.serve/v1", "kit": "servekit",
		"client": map[string]string{"name": name}, "run": run}, &o)
	if err == nil && code != http.StatusCreated {
		err = fmt.Errorf("servekit: opening a session: %d", code)
	}
	return o, err
}

// Session runs one session of the client name on the "ok" scenario: it
// passes it ([Kit.PassOK]), or reports nothing when fail is set (a session
// failed: its scenario not reported), and says done. It returns the
// session's id.
func (k *Kit) Session(ctx context.Context, name string, fail bool) (string, error) {
	o, err := k.Open(ctx, name, "^ok$")
	if err != nil {
		return "", err
	}
	if !fail {
		if err := k.PassOK(ctx, o); err != nil {
			return o.Session, err
		}
	}
	return o.Session, k.Done(ctx, o)
}

// Done says the session o is done.
func (k *Kit) Done(ctx context.Context, o Opened) error {
	code, err := k.Post(ctx, o.DoneURL, map[string]any{}, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("servekit: done: %d", code)
	}
	return err
}

// PassOK runs the session's one scenario, "ok", as a client that passes
// it: the scenario's request and /ok through a client of its own, then
// its report.
func (k *Kit) PassOK(ctx context.Context, o Opened) error {
	return k.runOK(ctx, o)
}

func (k *Kit) runOK(ctx context.Context, o Opened) error {
	var list struct {
		Scenarios []struct {
			Name  string `json:"name"`
			URL   string `json:"url"`
			OKURL string `json:"ok_url"`
		} `json:"scenarios"`
	}
	if code, err := k.Get(ctx, o.ScenariosURL, &list); err != nil || code != http.StatusOK || len(list.Scenarios) != 1 {
		return fmt.Errorf("servekit: scenarios: %d %v", code, err)
	}
	sc := list.Scenarios[0]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(url string) (map[string]any, float64) {
		start := time.Now()
		resp, err := client.Get(url)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ms := float64(time.Since(start)) / 1e6
		if err != nil {
			return map[string]any{"error": map[string]string{"kind": "other", "message": err.Error()}}, ms
		}
		return map[string]any{"status": resp.StatusCode}, ms
	}
	outcome, elapsed := get(sc.URL)
	ok, okMS := get(sc.OKURL)
	ok["elapsed_ms"] = okMS
	tr.CloseIdleConnections()
	code, err := k.Post(ctx, o.ReportURL, map[string]any{"scenario": sc.Name, "outcome": outcome, "elapsed_ms": elapsed,
		"ok": ok, "config": "servekit"}, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("servekit: report: %d", code)
	}
	return err
}

// Env names the environment of [Main].
const (
	// EnvSessions: how many sessions Main runs, one after the other.
	EnvSessions = "SERVEKIT_SESSIONS"
	// EnvFailFirst: when "1", Main's first session fails.
	EnvFailFirst = "SERVEKIT_FAIL_FIRST"
)

// Main is a kit's command run by `connaudit serve -- CMD` (a test binary
// calls it when EnvSessions is set): it runs EnvSessions sessions against
// CONNAUDIT_URL, the first failed if EnvFailFirst is "1", and returns the
// exit status: 0, or 1 on an error of the protocol.
func Main() int {
	n, err := strconv.Atoi(os.Getenv(EnvSessions))
	url := os.Getenv("CONNAUDIT_URL")
	if err != nil || n < 1 || url == "" {
		fmt.Fprintln(os.Stderr, "servekit: set CONNAUDIT_URL and "+EnvSessions)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k := New(url)
	for i := range n {
		if _, err := k.Session(ctx, "servekit", i == 0 && os.Getenv(EnvFailFirst) == "1"); err != nil {
			fmt.Fprintln(os.Stderr, errors.Join(fmt.Errorf("servekit: session %d", i+1), err))
			return 1
		}
	}
	return 0
}
