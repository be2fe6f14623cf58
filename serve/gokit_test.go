package serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
)

// A kit in Go, for the tests that need no tool installed: the client
// under test is a net/http client configured from each policy (its bounds,
// no retry unless retry500 says so, which retries a 500 as a broken
// configuration would).

func ctlDo(t *testing.T, method, url string, body any, out any) int {
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
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// goKit runs a session of a net/http client on the scenarios run selects.
func goKit(t *testing.T, srv *Server, run string, retry500 bool) *SessionReport {
	t.Helper()
	return goKitTerms(t, srv, run, retry500, nil)
}

// goKitTerms is [goKit] with the client's terms declared.
func goKitTerms(t *testing.T, srv *Server, run string, retry500 bool, terms map[string]string) *SessionReport {
	t.Helper()
	var opened Opened
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "go-test",
		Client: Client{Name: "net/http", Version: "test", Terms: terms}, Protocols: []string{"http1", "h2"}, Run: run}, &opened); code != 201 {
		t.Fatalf("open: %d", code)
	}
	var list Scenarios
	ctlDo(t, "GET", opened.ScenariosURL, nil, &list)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CA())
	for _, sc := range list.Scenarios {
		p := sc.Policy
		d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
			DialContext:         (&net.Dialer{Timeout: d(max(p.ConnectTimeoutMS, p.TLSTimeoutMS))}).DialContext,
			TLSHandshakeTimeout: d(p.TLSTimeoutMS), ResponseHeaderTimeout: d(p.ReadTimeoutMS)}
		c := &http.Client{Transport: tr, Timeout: d(p.AttemptTimeoutMS)}
		call := func(url string) Outcome {
			tries := 1
			if retry500 && sc.Contract == "A5" {
				tries = 3
			}
			var o Outcome
			for range tries {
				resp, err := c.Get(url)
				if err != nil {
					kind := KindConnection
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						kind = KindTimeout
					}
					return Outcome{Error: &ErrorOutcome{Kind: kind, Message: err.Error()}}
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					return Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: err.Error()}}
				}
				o = Outcome{Status: resp.StatusCode}
				if resp.StatusCode != 500 {
					break
				}
			}
			return o
		}
		rep := KitReport{Scenario: sc.Name, Config: "net/http"}
		switch sc.Steps {
		case audit.StepsRequest:
			start := time.Now()
			o := call(sc.URL)
			rep.Outcome, rep.ElapsedMS = &o, float64(time.Since(start))/1e6
			ok := call(sc.OKURL)
			rep.OK = &ok
		case audit.StepsWarmCloseThenRequest:
			call(sc.URL)
			var closed Closed
			if code := ctlDo(t, "POST", sc.CloseURL, struct{}{}, &closed); code != 200 {
				t.Fatalf("close %s: %d", sc.Name, code)
			}
			start := time.Now()
			o := call(sc.URL)
			rep.Outcome, rep.ElapsedMS = &o, float64(time.Since(start))/1e6
			ok := call(sc.OKURL)
			rep.OK = &ok
		case audit.StepsWarmThenHeldBody:
			rep.NotConfigurable = "net/http's Transport writes a request's headers before it reads a body of unknown length"
		default:
			rep.Skipped = "the test kit runs request steps only"
		}
		var res Result
		if code := ctlDo(t, "POST", opened.ReportURL, rep, &res); code != 200 {
			t.Fatalf("report %s: %d", sc.Name, code)
		}
		tr.CloseIdleConnections()
	}
	var done SessionReport
	ctlDo(t, "POST", opened.DoneURL, Done{}, &done)
	return &done
}

func resultOf(t *testing.T, r *SessionReport, name string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.Name == name {
			return res
		}
	}
	t.Fatalf("no result %s", name)
	return Result{}
}

// TestGoKitVerdicts: a net/http client through the protocol gets the
// verdicts its behaviour earns, with the server's counts.
func TestGoKitVerdicts(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rep := goKit(t, srv, `^(ok|status-503|reset|close-mid-body|attempt-deadline|h2/ok|retry/500|connect-refused)$`, false)
	if !rep.OK || rep.Passed != 8 || rep.Failed != 0 {
		var b strings.Builder
		rep.WriteText(&b)
		t.Fatalf("report:\n%s", b.String())
	}
	ok := resultOf(t, rep, "ok")
	if ok.Server.Requests != 1 || !ok.Server.OKReused || ok.Fate != "reused" || len(ok.Server.Connections) != 1 {
		t.Errorf("ok: %+v", ok)
	}
	reset := resultOf(t, rep, "reset")
	if c := reset.Server.Connections[0]; reset.Class != "reset" || c.ClosedBy != "server" || c.How != "rst" {
		t.Errorf("reset: class %s, conns %+v", reset.Class, reset.Server.Connections)
	}
	// Its times, in order: accepted, first request read, closed; and this
	// scenario's one request on it.
	if c := reset.Server.Connections[0]; c.AcceptedAt.IsZero() || c.FirstRequestAt.Before(c.AcceptedAt) ||
		c.ClosedAt.Before(c.FirstRequestAt) || len(c.RequestsAt) != 1 || c.RequestsAt[0].Before(c.FirstRequestAt) {
		t.Errorf("reset: connection's times %+v", c)
	}
	ad := resultOf(t, rep, "attempt-deadline")
	if c := ad.Server.Connections[0]; ad.Class != "deadline" || c.ClosedBy != "client" || ad.Server.CancelsObserved != 1 {
		t.Errorf("attempt-deadline: class %s, cancels %d, conns %+v", ad.Class, ad.Server.CancelsObserved, ad.Server.Connections)
	}
	if h2 := resultOf(t, rep, "h2/ok"); h2.Server.Requests != 1 || h2.Fate != "reused" {
		t.Errorf("h2/ok: %+v", h2)
	}
}

// TestGoKitRetrying500FailsA5: the same client retrying a 500 fails A5
// with the server's counts and a fix: in the policy's terms when its kit
// declares none, in the declared terms when it does (and the session's
// report does not carry them).
func TestGoKitRetrying500FailsA5(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rep := goKit(t, srv, `^retry/500$`, true)
	r := resultOf(t, rep, "retry/500")
	if r.Pass || r.Server.Requests != 3 || len(r.Mismatches) != 1 || r.Mismatches[0] != "A5: 500 was retried: 3 requests, contract 1" {
		t.Fatalf("A5: pass %v, requests %d, %q", r.Pass, r.Server.Requests, r.Mismatches)
	}
	if r.Fix != generic[tRetryStatuses] {
		t.Errorf("fix %q", r.Fix)
	}
	if rep.OK {
		t.Error("the session is ok")
	}
	mine := "http.Client: retry 503 only, in the loop around Do"
	rep = goKitTerms(t, srv, `^retry/500$`, true, map[string]string{"retry_statuses": mine, "stale": "x"})
	if r := resultOf(t, rep, "retry/500"); r.Pass || r.Fix != mine {
		t.Errorf("with terms: pass %v, fix %q, want %q", r.Pass, r.Fix, mine)
	}
	if rep.Client.Terms != nil {
		t.Errorf("the session's report carries the terms: %v", rep.Client.Terms)
	}
}

// TestSessionsAtOnce: four sessions of the Go kit against one server at
// once each get the counts of one alone.
func TestSessionsAtOnce(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const sel = `^(ok|status-503|close-before-response|retry/503-503-ok|retry/500)$`
	want := counts(goKit(t, srv, sel, false))
	out := make(chan string, 4)
	for range 4 {
		go func() { out <- counts(goKit(t, srv, sel, false)) }()
	}
	for range 4 {
		if got := <-out; got != want {
			t.Errorf("a session at once:\n%s\nalone:\n%s", got, want)
		}
	}
}

// TestBadInput: what a kit gets wrong is a 4xx with the reason, never a
// panic or a hang.
func TestBadInput(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	open := `{"protocol":"connaudit.serve/v1","kit":"t","client":{"name":"x"},"run":"^ok$"}`
	cases := []struct {
		path, body string
		code       int
		says       string
	}{
		{"/v1/sessions", `{"protocol":"connaudit.serve/v2","client":{"name":"x"}}`, 400, `this server speaks \"connaudit.serve/v1\"`},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x"},"extra":1}`, 400, "unknown field"},
		{"/v1/sessions", `{"protocol":`, 400, "malformed JSON"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x"}} {}`, 400, "data after the object"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":""}}`, 400, "client.name is empty"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x"},"run":"("}`, 400, "bad run pattern"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x"},"protocols":["h3"]}`, 400, `protocol \"h3\"`},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x"},"run":"nothing-matches"}`, 400, "no scenario is selected"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"` + strings.Repeat("x", 70<<10) + `"}}`, 413, "over 65536 bytes"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x","terms":{"read_timout":"t"}}}`, 400,
			`client.terms: \"read_timout\" is not a term (the terms: attempt_timeout, cancel,`},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x","terms":{"stale":" "}}}`, 400,
			"client.terms.stale is empty: leave a term out"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x","terms":{"stale":"` + strings.Repeat("s", 1001) + `"}}}`,
			400, "client.terms.stale is 1001 bytes, longer than 1000"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x","terms":{"stale":3}}}`, 400, "malformed JSON"},
		{"/v1/sessions", `{"protocol":"connaudit.serve/v1","client":{"name":"x","terms":["stale"]}}`, 400, "malformed JSON"},
		{"/v1/sessions/nope/reports", `{}`, 404, `no open session \"nope\"`},
		{"/v1/sessions/nope/done", `{}`, 404, "no open session"},
		{"/v2/anything", `{}`, 404, "no such endpoint"},
	}
	for _, c := range cases {
		code, body := post(c.path, c.body)
		if code != c.code || !strings.Contains(body, c.says) || !strings.Contains(body, Protocol) {
			t.Errorf("POST %s %.60s: %d %s; want %d saying %q", c.path, c.body, code, body, c.code, c.says)
		}
	}
	var opened Opened
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", json.RawMessage(open), &opened); code != 201 {
		t.Fatalf("open: %d", code)
	}
	reports := strings.TrimPrefix(opened.ReportURL, srv.URL())
	bad := []struct {
		body string
		code int
		says string
	}{
		{`{"scenario":"ok"}`, 400, "exactly one of outcome, not_configurable, skipped"},
		{`{"scenario":"ok","outcome":{"status":200},"skipped":"x"}`, 400, "exactly one"},
		{`{"scenario":"ok","outcome":{}}`, 400, "neither a status"},
		{`{"scenario":"ok","outcome":{"status":200,"error":{"kind":"timeout"}}}`, 400, "both a status and an error"},
		{`{"scenario":"ok","outcome":{"error":{"kind":"slow"}}}`, 400, `kind \"slow\" is not one of`},
		{`{"scenario":"ok","outcome":{"status":200},"elapsed_ms":-1}`, 400, "elapsed_ms -1 is not a time in 0..3600000 ms"},
		{`{"scenario":"ok","outcome":{"status":200},"attempts":-2}`, 400, "attempts -2"},
		{`{"scenario":"nope","outcome":{"status":200}}`, 404, `no scenario \"nope\"`},
		{`{"scenario":"ok","outcome":{"status":200},"ok":{"status":200}}`, 200, `"name": "ok"`},
		{`{"scenario":"ok","outcome":{"status":200}}`, 409, "reported already"},
	}
	for _, c := range bad {
		code, body := post(reports, c.body)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("report %s: %d %s; want %d saying %q", c.body, code, body, c.code, c.says)
		}
	}
	// A message is kept printable and cut to 1 KiB.
	var opened2 Opened
	ctlDo(t, "POST", srv.URL()+"/v1/sessions", json.RawMessage(open), &opened2)
	var res Result
	msg := "\x1b[31mred\x1b[0m" + strings.Repeat("y", 4000)
	ctlDo(t, "POST", opened2.ReportURL, KitReport{Scenario: "ok", Outcome: &Outcome{Error: &ErrorOutcome{Kind: KindOther, Message: msg}}}, &res)
	if m := res.Caller.Error.Message; strings.Contains(m, "\x1b") || len(m) > 1100 {
		t.Errorf("message kept: %q…", m[:40])
	}
	// Secrets a client's message quotes are masked.
	var opened3 Opened
	ctlDo(t, "POST", srv.URL()+"/v1/sessions", json.RawMessage(open), &opened3)
	leaky := "GET http://user:pw@127.0.0.1/x?token=abc123 failed; sent Authorization: Bearer tok-9; X-Api-Secret=s3cr3t"
	ctlDo(t, "POST", opened3.ReportURL, KitReport{Scenario: "ok", Outcome: &Outcome{Error: &ErrorOutcome{Kind: KindOther, Message: leaky}}}, &res)
	for _, secret := range []string{"pw@", "abc123", "tok-9", "s3cr3t"} {
		if strings.Contains(res.Caller.Error.Message, secret) {
			t.Errorf("message %q shows %q", res.Caller.Error.Message, secret)
		}
	}
	if code, body := post(strings.TrimPrefix(opened.DoneURL, srv.URL()), `{}`); code != 200 || !strings.Contains(body, `"passed": 0`) {
		t.Errorf("done: %d %s", code, body)
	}
	// After done, the session is done, not unknown: 409.
	if code, body := post(reports, `{"scenario":"ok","outcome":{"status":200}}`); code != 409 || !strings.Contains(body, "is done") {
		t.Errorf("report after done: %d %s", code, body)
	}
	if code, body := post(strings.TrimPrefix(opened.DoneURL, srv.URL()), `{}`); code != 409 || !strings.Contains(body, "is done") {
		t.Errorf("done after done: %d %s", code, body)
	}
}

// TestTooManySessions: past maxSessions a session is refused with 429.
func TestTooManySessions(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	open := OpenRequest{Protocol: Protocol, Client: Client{Name: "x"}, Run: "^ok$"}
	for i := range maxSessions {
		if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", open, &Opened{}); code != 201 {
			t.Fatalf("session %d: %d", i, code)
		}
	}
	var e apiError
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", open, &e); code != 429 || !strings.Contains(e.Error, "64 sessions") {
		t.Errorf("%d %q", code, e.Error)
	}
}

// TestSessionMemory logs the heap a session of the whole catalogue holds,
// and checks it is bounded: under 2 MiB per session.
func TestSessionMemory(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before := heap()
	const n = 16
	for range n {
		var o Opened
		ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Client: Client{Name: "x"},
			Protocols: []string{"http1", "h2"}, Skip: "connect-hang|tls-handshake-stall"}, &o)
		ctlDo(t, "GET", o.ScenariosURL, nil, &Scenarios{})
	}
	per := (int64(heap()) - int64(before)) / n
	t.Logf("a session of the catalogue holds about %d KiB before any request", per>>10)
	if per > 2<<20 {
		t.Errorf("a session holds %d bytes", per)
	}
	if os.Getenv("CONNAUDIT_SHOW") != "" {
		fmt.Println(per)
	}
	_ = context.Background
}

// TestSessionLimits: a client that opens more connections than a session
// records is counted past the limit, not recorded, and said in the
// report; the session's heap stays bounded.
func TestSessionLimits(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before := heap()
	var o Opened
	ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Client: Client{Name: "x"}, Run: "^ok$"}, &o)
	var list Scenarios
	ctlDo(t, "GET", o.ScenariosURL, nil, &list)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = maxConnsPerSession + 44
	for range n {
		resp, err := c.Get(list.Scenarios[0].OKURL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	grown := int64(heap()) - int64(before)
	var done SessionReport
	ctlDo(t, "POST", o.DoneURL, Done{}, &done)
	if !strings.Contains(done.Limits, "44 connections") {
		t.Errorf("limits: %q", done.Limits)
	}
	t.Logf("a session with %d connections recorded holds about %d KiB", maxConnsPerSession, grown>>10)
	if grown > 2<<20 {
		t.Errorf("the session holds %d bytes", grown)
	}
}

// heldBodyKit plays, on raw sockets, a client that holds a kept-alive
// connection for a POST whose body is not ready (warm-then-held-body):
// a warm-up GET on one connection, then close_url while nothing of the
// POST is written; after the server's close it either reports the loss
// (resend false: Reactor Netty with disableRetry(true)) or sends the POST
// on a new connection by itself (resend true: disableRetry(false)). It
// returns the session's result for the scenario name.
func heldBodyKit(t *testing.T, srv *Server, name string, resend bool) Result {
	t.Helper()
	var opened Opened
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "go-test",
		Client: Client{Name: "raw", Version: "test"}, Run: "^" + name + "$"}, &opened); code != 201 {
		t.Fatalf("open: %d", code)
	}
	var list Scenarios
	ctlDo(t, "GET", opened.ScenariosURL, nil, &list)
	rep := heldBodyReport(t, list.Scenarios[0], resend)
	var res Result
	if code := ctlDo(t, "POST", opened.ReportURL, rep, &res); code != 200 {
		t.Fatalf("report: %d", code)
	}
	ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
	return res
}

// heldBodyReport takes the held-body steps of sc with raw sockets and
// returns the report: the loss to the caller, or (resend) the POST sent
// again on a new connection.
func heldBodyReport(t *testing.T, sc ScenarioSpec, resend bool) KitReport {
	t.Helper()
	host := strings.TrimPrefix(sc.URL, "http://")
	host, path, _ := strings.Cut(host, "/")
	path = "/" + path
	send := func(c net.Conn, method, body string) (int, error) {
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", method, path, host, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if code, err := send(c, "GET", ""); err != nil || code != 200 {
		t.Fatalf("warm-up: %d %v", code, err)
	}
	one := 1
	rep := KitReport{Scenario: sc.Name, Attempts: &one, Config: "raw sockets"}
	var closed Closed
	if code := ctlDo(t, "POST", sc.CloseURL, struct{}{}, &closed); code != 200 {
		t.Fatalf("close: %d", code)
	}
	// The server's close reaches the held connection: EOF or a reset.
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the held connection was not closed")
	}
	c.Close()
	o := Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: "the connection was lost before the request was written"}}
	if resend {
		c2, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		c2.SetDeadline(time.Now().Add(10 * time.Second))
		code, err := send(c2, "POST", sc.Request.Body)
		if err != nil {
			t.Fatal(err)
		}
		o = Outcome{Status: code}
	}
	rep.Outcome = &o
	rep.OK = &Outcome{Status: getStatus(t, oneShot(), sc.OKURL)}
	return rep
}

// oneShot returns a client for the kit's control and /ok requests, each on
// a connection of its own.
func oneShot() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// getStatus GETs url with c, reads the body and returns the status.
func getStatus(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHeldBodyResend: the server closes (RST or FIN) the kept-alive
// connection a client holds for a POST not yet written. None of it reached
// the server, so both paths pass: the loss reported to the caller (0
// requests, and a finding that sending it again would have been safe), or
// the POST sent again on a new connection (1 request, not a hidden retry:
// the server read it once).
func TestHeldBodyResend(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, name := range []string{"reset-before-send", "close-before-send"} {
		how := map[string]string{"reset-before-send": "rst", "close-before-send": "fin"}[name]
		lost := heldBodyKit(t, srv, name, false)
		// The held connection, and /ok's.
		if c := lost.Server.Connections[0]; !lost.Pass || lost.Server.Requests != 0 || len(lost.Server.Connections) != 2 ||
			c.ClosedBy != "server" || c.How != how || c.Requests != 1 || len(lost.Findings) != 1 ||
			lost.Findings[0].Class != FindingLossToCaller {
			t.Errorf("%s, the loss reported: pass %v, %d requests, conns %+v, %q, findings %+v", name, lost.Pass,
				lost.Server.Requests, lost.Server.Connections, lost.Mismatches, lost.Findings)
		}
		resent := heldBodyKit(t, srv, name, true)
		if !resent.Pass || resent.HiddenRetry || resent.Server.Requests != 1 || len(resent.Server.Connections) != 3 ||
			len(resent.Findings) != 0 || len(resent.Notes) == 0 {
			t.Errorf("%s, resent: pass %v, hidden %v, %d requests, %d conns, %q, findings %+v, notes %q", name, resent.Pass,
				resent.HiddenRetry, resent.Server.Requests, len(resent.Server.Connections), resent.Mismatches, resent.Findings,
				resent.Notes)
		}
	}
}

// TestIdleClose: the server closes a kept-alive connection while it is
// idle; net/http's Transport sees the FIN and closes its side, and sends
// the next request on a new connection.
func TestIdleClose(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rep := goKit(t, srv, `^idle-close$`, false)
	r := resultOf(t, rep, "idle-close")
	if !r.Pass || r.Server.Requests != 1 || len(r.Server.Connections) != 2 {
		t.Fatalf("pass %v, %d requests, conns %+v, %q", r.Pass, r.Server.Requests, r.Server.Connections, r.Mismatches)
	}
	if c := r.Server.Connections[0]; c.ClosedBy != "server" || c.How != "fin" || c.Requests != 1 {
		t.Errorf("the closed connection: %+v", c)
	}
	if len(r.Notes) == 0 || r.Notes[0] != "the client closed its side of the idle connection the server closed" {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestSourceNumbers: with SourceNumbers the contracts the catalogue scales
// down are served at the source's own numbers, the others as ever.
func TestSourceNumbers(t *testing.T) {
	policies := func(opts ...Option) map[string]Policy {
		srv, err := New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		var o Opened
		ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Client: Client{Name: "x"}, Run: `^retry/`}, &o)
		var list Scenarios
		ctlDo(t, "GET", o.ScenariosURL, nil, &list)
		out := map[string]Policy{}
		for _, sc := range list.Scenarios {
			out[sc.Contract] = sc.Policy
		}
		ctlDo(t, "POST", o.DoneURL, Done{}, &SessionReport{})
		return out
	}
	scaled, source := policies(), policies(SourceNumbers())
	type bounds struct{ attempt, total, delay float64 }
	of := func(p Policy) bounds { return bounds{p.AttemptTimeoutMS, p.TotalTimeoutMS, p.DelayMS} }
	for c, want := range map[string][2]bounds{
		"A6": {{150, 8000, 10}, {1000, 8000, 10}},
		"A8": {{300, 450, 300}, {1000, 1500, 1000}},
		"A9": {{500, 2000, 100}, {500, 2000, 200}},
		"A2": {{3000, 8000, 10}, {3000, 8000, 10}},
	} {
		if got := [2]bounds{of(scaled[c]), of(source[c])}; got != want {
			t.Errorf("%s: scaled, source %+v; want %+v", c, got, want)
		}
	}
}

// TestCloseURLBadInput: close_url refuses, with the reason, a scenario it
// does not know, one with no connection to close, and a close before the
// warm-up it closes the connection of.
func TestCloseURLBadInput(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var o Opened
	ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Client: Client{Name: "x"}, Run: `^(ok|idle-close)$`}, &o)
	var list Scenarios
	ctlDo(t, "GET", o.ScenariosURL, nil, &list)
	base := strings.TrimSuffix(o.ScenariosURL, "/scenarios") + "/close?scenario="
	for _, c := range []struct {
		query string
		code  int
		says  string
	}{
		{"9", 404, `no scenario \"9\"`},
		{"x", 404, `no scenario \"x\"`},
		{"0", 400, "scenario ok has no connection for the server to close"},
		{"1", 409, "the warm-up request was not seen"},
	} {
		var e apiError
		if code := ctlDo(t, "POST", base+c.query, struct{}{}, &e); code != c.code || !strings.Contains(e.Error, strings.ReplaceAll(c.says, `\"`, `"`)) || e.Protocol != Protocol {
			t.Errorf("close %s: %d %q; want %d saying %q", c.query, code, e.Error, c.code, c.says)
		}
	}
	if list.Scenarios[1].CloseURL != base+"1" || list.Scenarios[0].CloseURL != "" {
		t.Errorf("close_url: %q, %q", list.Scenarios[0].CloseURL, list.Scenarios[1].CloseURL)
	}
}

// TestFateOfALateClose: a client that stopped reading a large body
// (early-body-close, whose fate is reported but not judged: draining it
// is correct too) closes the connection only as its report goes out. The
// server records that close a little after the report arrives, and the
// fate reported is still the close, never "open": the report waits for
// it, as it does for a fate it judges. Run a few times in one server, as
// the close and the report race each time.
func TestFateOfALateClose(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i := range 5 {
		var opened Opened
		if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "go-test",
			Client: Client{Name: "raw", Version: "test"}, Run: "^early-body-close$"}, &opened); code != 201 {
			t.Fatalf("open: %d", code)
		}
		var list Scenarios
		ctlDo(t, "GET", opened.ScenariosURL, nil, &list)
		sc := list.Scenarios[0]
		host, path, _ := strings.Cut(strings.TrimPrefix(sc.URL, "http://"), "/")
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /%s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, sc.ReadBytes)); err != nil {
			t.Fatal(err)
		}
		okc := oneShot()
		okStatus := getStatus(t, okc, sc.OKURL)

		one := 1
		b, err := json.Marshal(KitReport{Scenario: sc.Name, Outcome: &Outcome{Status: resp.StatusCode}, Attempts: &one,
			OK: &Outcome{Status: okStatus}, Config: "raw sockets"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { c.Close() }, // the body's connection, as the report goes
		})
		req, err := http.NewRequestWithContext(ctx, "POST", opened.ReportURL, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		r, err := okc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		err = json.NewDecoder(r.Body).Decode(&res)
		r.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
		if want := "closed by client (early-body-close)"; !res.Pass || res.Fate != want {
			t.Errorf("run %d: pass %v, fate %q, want %q", i, res.Pass, res.Fate, want)
		}
	}
}
