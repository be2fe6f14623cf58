package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// openSession opens a session of a test kit on the scenarios run selects
// and returns what it was offered.
func openSession(t *testing.T, srv *Server, run string) (Opened, []ScenarioSpec) {
	t.Helper()
	var opened Opened
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "go-test",
		Client: Client{Name: "net/http", Version: "test"}, Protocols: []string{"http1"}, Run: run}, &opened); code != 201 {
		t.Fatalf("open: %d", code)
	}
	var list Scenarios
	ctlDo(t, "GET", opened.ScenariosURL, nil, &list)
	return opened, list.Scenarios
}

// TestNoRequestNoVerdict: a kit that reports a response its client never
// asked the server for gets that said, and a fix about the kit, not a
// retry rule of the policy's.
func TestNoRequestNoVerdict(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^retry/404$`)
	ok := Outcome{Status: 200}
	var res Result
	ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: list[0].Name, Outcome: &Outcome{Status: 404}, OK: &ok}, &res)
	ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
	want := "the kit reported a response (status 404), but the server read no request for the faulted URL: the report is not what the client did"
	if res.Pass || len(res.Mismatches) != 1 || res.Mismatches[0] != want || !strings.HasPrefix(res.Fix, "check the kit") {
		t.Fatalf("pass %v, %q, fix %q", res.Pass, res.Mismatches, res.Fix)
	}
}

// TestCountsPerScenario: a client whose one pool carries a connection
// across scenarios (as fetch's global dispatcher does) has each
// scenario's requests counted on it, not the connection's whole life; the
// connection still open at done names where it was opened and last used,
// and does not fail the session.
func TestCountsPerScenario(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^(ok|status-503)$`)
	if len(list) != 2 {
		t.Fatalf("%d scenarios", len(list))
	}
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(url string) int {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	var results []Result
	for _, sc := range list {
		o := Outcome{Status: get(sc.URL)}
		ok := Outcome{Status: get(sc.OKURL)}
		one := 1
		var res Result
		ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: sc.Name, Outcome: &o, OK: &ok, Attempts: &one}, &res)
		results = append(results, res)
	}
	var done SessionReport
	ctlDo(t, "POST", opened.DoneURL, Done{}, &done)
	for _, res := range results {
		if len(res.Server.Connections) != 1 || res.Server.Connections[0].Requests != 2 {
			t.Errorf("%s: connections %+v: want one, with this scenario's 2 requests", res.Name, res.Server.Connections)
		}
	}
	if !results[1].Server.Connections[0].Reused {
		t.Errorf("the connection served more than one request in its life: %+v", results[1].Server.Connections)
	}
	if !done.OK || done.OpenAtDone != 1 || len(done.Findings) != 1 || done.Findings[0].Fails ||
		!strings.Contains(done.Findings[0].Text, "opened in ok; last used in status-503") {
		t.Fatalf("ok %v, open at done %d, findings %+v", done.OK, done.OpenAtDone, done.Findings)
	}
}

// TestJUnitFailsWithTheSession: a session's own failures (the kit gave
// up) fail a JUnit case, and a scenario's findings are in its case's
// output, so that the XML fails when the session does; the text and the
// JSON carry the finding with its class too.
func TestJUnitFailsWithTheSession(t *testing.T) {
	r := &SessionReport{Client: Client{Name: "c"}, Error: "the kit gave up: boom", Results: []Result{
		{Name: "hidden-retry", Pass: true, Findings: []Finding{{Class: FindingHiddenRetry, Text: "the server read 2 requests"}}}}}
	var b bytes.Buffer
	if err := WriteJUnit(&b, []*SessionReport{r}); err != nil {
		t.Fatal(err)
	}
	x := b.String()
	for _, want := range []string{`failures="1"`, `<testcase name="(the client as a whole)"`, "the kit gave up: boom",
		"finding (hidden-retry): the server read 2 requests"} {
		if !strings.Contains(x, want) {
			t.Errorf("no %q in:\n%s", want, x)
		}
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if !strings.Contains(text.String(), "finding (hidden-retry): the server read 2 requests") {
		t.Errorf("the text has no finding:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, []*SessionReport{r}); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Sessions []struct {
			Results []struct {
				Findings []Finding `json:"findings"`
			} `json:"results"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil || len(decoded.Sessions) != 1 ||
		len(decoded.Sessions[0].Results) != 1 || len(decoded.Sessions[0].Results[0].Findings) != 1 ||
		decoded.Sessions[0].Results[0].Findings[0].Class != FindingHiddenRetry {
		t.Errorf("the JSON has no finding of class hidden-retry:\n%s", js.String())
	}
}

// TestUnboundedTotalSaidAsSuch: a client whose every attempt ends at its
// own bound, but which tries again past the server's guard (curl's
// --max-time per attempt with --retry), is told that each attempt was
// bounded and their total was not, not that no bound fired.
func TestUnboundedTotalSaidAsSuch(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's guard (8 s)")
	}
	beside(t)
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^response-header-timeout$`)
	sc := list[0]
	// Attempts of 3 s each, one after the other, until the server cuts
	// one: each ends by itself, the client closing its connection.
	attempts := 0
	start := time.Now()
	for attempts < 5 {
		attempts++
		c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get(sc.URL)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		var ne interface{ Timeout() bool }
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			break // the server cut it
		}
	}
	o := Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: "cut"}}
	ok := okVia(t, sc.OKURL)
	var res Result
	ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: sc.Name, Outcome: &o, OK: &ok, Attempts: &attempts,
		ElapsedMS: ms(time.Since(start))}, &res)
	ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
	if !res.Unbounded || len(res.Mismatches) == 0 || !strings.Contains(res.Mismatches[0], "ended, the client closing its connection, but nothing bounded them all") {
		t.Fatalf("%d attempts: unbounded %v, %q", attempts, res.Unbounded, res.Mismatches)
	}
}

// TestIdleCloseNotNoticed: a client that keeps its side of the idle
// connection the server closed (a raw socket that reads nothing more) is
// told so in plain words: how long after the server's FIN.
func TestIdleCloseNotNoticed(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opened, list := openSession(t, srv, `^idle-close$`)
	sc := list[0]
	u, err := url.Parse(sc.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The warm-up on a connection the client keeps, and never reads again.
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.RequestURI(), u.Host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var closed Closed
	if code := ctlDo(t, "POST", sc.CloseURL, struct{}{}, &closed); code != 200 || closed.ClientClosed {
		t.Fatalf("close: %d, client closed %v", code, closed.ClientClosed)
	}
	// The request and /ok through a client of their own, one connection.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	get := func(u string) Outcome {
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return Outcome{Status: resp.StatusCode}
	}
	o, ok := get(sc.URL), get(sc.OKURL)
	var res Result
	ctlDo(t, "POST", opened.ReportURL, KitReport{Scenario: sc.Name, Outcome: &o, OK: &ok}, &res)
	c.Close()
	ctlDo(t, "POST", opened.DoneURL, Done{}, &SessionReport{})
	want := "the client had not closed its side of the idle connection 1s after the server's FIN"
	if !res.Pass || !slices.Contains(res.Notes, want) {
		t.Errorf("pass %v, %q, notes %q, want %q", res.Pass, res.Mismatches, res.Notes, want)
	}
}
