package connaudit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"expvar"
	"fmt"
	"html"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/probe"
	"github.com/connaudit/connaudit/proxy"
	"github.com/connaudit/connaudit/serve"
	"github.com/stretchr/testify/require"
)

// The secrets a request carries: a user and a password in its URL, a token
// and a session value in its query (the session value is written escaped,
// as a base64 token would be), a bearer token and a cookie in its headers,
// and the Basic credentials http.Client derives from the URL's user.
const (
	secretUserName  = "Us3rNameValue"
	secretPassword  = "S3cr3tPassw0rd"
	secretToken     = "T0kenValue"
	secretSession   = "S3ss+ion/Value=="
	secretBearer    = "B3arerValue"
	secretCookie    = "C00kieValue"
	secretsPath     = "/api/items"
	secretsQueryKey = "token"
)

var secretValues = []string{
	secretUserName, secretPassword, secretToken, secretSession, url.QueryEscape(secretSession), secretBearer, secretCookie,
	base64.StdEncoding.EncodeToString([]byte(secretUserName + ":" + secretPassword)),
}

// secretURL returns a URL on hostport carrying the URL secrets.
func secretURL(scheme, hostport string) string {
	return scheme + "://" + secretUserName + ":" + secretPassword + "@" + hostport + secretsPath +
		"?" + secretsQueryKey + "=" + secretToken + "&session=" + url.QueryEscape(secretSession)
}

// secretRequest returns a GET of raw with the header secrets.
func secretRequest(t *testing.T, ctx context.Context, raw string, headers bool) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	require.NoError(t, err)
	if headers {
		req.Header.Set("Authorization", "Bearer "+secretBearer)
		req.Header.Set("Cookie", "id="+secretCookie)
	}
	return req
}

// outputs collects what each output wrote, by name.
type outputs struct {
	mu   sync.Mutex
	text map[string]*bytes.Buffer
}

func (o *outputs) buf(name string) *bytes.Buffer {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.text == nil {
		o.text = map[string]*bytes.Buffer{}
	}
	if o.text[name] == nil {
		o.text[name] = &bytes.Buffer{}
	}
	return o.text[name]
}

// addReport adds the audit report rep in each of its forms: text, JSON,
// JUnit.
func (o *outputs) addReport(t *testing.T, rep *audit.Report) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b, true))
	o.add("audit text", b.String())
	b.Reset()
	require.NoError(t, rep.WriteJSON(&b))
	o.add("audit json", b.String())
	b.Reset()
	require.NoError(t, rep.WriteJUnit(&b))
	o.add("audit junit", b.String())
}

// add appends s to the output name.
func (o *outputs) add(name, s string) {
	b := o.buf(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	b.WriteString(s)
	b.WriteByte('\n')
}

// addHTML adds a page as written and with its character references
// decoded: html/template writes '&' as "&amp;" and '+' as "&#43;", so a
// secret could show in the page and not in its bytes.
func (o *outputs) addHTML(t *testing.T, name string, page string) {
	t.Helper()
	require.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"), "%s is a page:\n%s", name, page)
	o.add(name, page)
	o.add(name+" decoded", html.UnescapeString(page))
}

// addPage adds p as WriteHTML writes it (see addHTML).
func (o *outputs) addPage(t *testing.T, name string, p picture.Page) {
	t.Helper()
	var b strings.Builder
	require.NoError(t, picture.WriteHTML(&b, p))
	o.addHTML(t, name, b.String())
}

// addTrace adds a Trace Event Format file as written and with its JSON
// strings decoded ("\u0026" is '&'), keys and values, one a line.
func (o *outputs) addTrace(t *testing.T, name string, trace []byte) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(trace, &v), "%s is JSON:\n%s", name, trace)
	var decoded strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			decoded.WriteString(v + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				decoded.WriteString(k + "\n")
				walk(e)
			}
		}
	}
	walk(v)
	o.add(name, string(trace))
	o.add(name+" decoded", decoded.String())
}

// addSets adds sets as the trace file WriteTrace writes (see addTrace).
func (o *outputs) addSets(t *testing.T, name string, sets []picture.Set) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, picture.WriteTrace(&b, sets))
	o.addTrace(t, name, b.Bytes())
}

// addProbePictures adds rep's page and trace file as connaudit probe
// writes them: the trace streamed, a request at a time, then the
// connections.
func (o *outputs) addProbePictures(t *testing.T, req *http.Request, rep *probe.Result) {
	t.Helper()
	var reqs []picture.Request
	var b bytes.Buffer
	tw := picture.NewTraceWriter(&b, time.Now())
	tw.Set("probe " + req.Method + " " + redact.URL(req.URL))
	for _, tl := range rep.Timelines {
		for _, r := range picture.Attempts(tl) {
			tw.Request(r)
			reqs = append(reqs, r)
		}
	}
	set := pictures.Probe(rep, reqs, 0)
	for _, c := range set.Conns {
		tw.Conn(c)
	}
	require.NoError(t, tw.Close())
	o.addTrace(t, "probe trace events", b.Bytes())
	o.addPage(t, "probe html", picture.Page{Title: "connaudit probe", Sets: []picture.Set{set}})
}

// addTracePictures adds tl's page and trace file as connaudit trace
// writes them.
func (o *outputs) addTracePictures(t *testing.T, tl *httptrace.Timeline) {
	t.Helper()
	pg := pictures.Trace(tl)
	o.addPage(t, "trace html", pg)
	o.addSets(t, "trace trace events", pg.Sets)
}

// addScenarioPictures adds rep's page and trace file as connaudit
// scenarios writes them.
func (o *outputs) addScenarioPictures(t *testing.T, rep audit.Report) {
	t.Helper()
	sets := pictures.Scenarios(rep)
	require.NotEmpty(t, sets)
	o.addPage(t, "scenarios html", picture.Page{Title: "connaudit scenarios", Sets: sets})
	o.addSets(t, "scenarios trace events", sets)
}

// addPoolPage adds the pool's debug page, ?format=html.
func (o *outputs) addPoolPage(t *testing.T, p *pool.Pool) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=html", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	o.addHTML(t, "pool handler html", rec.Body.String())
}

// lockedWriter serialises writes of observers that may run concurrently.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// echoRequestLine starts a raw server on loopback that answers each request
// with its own request line as the status line (a broken server whose
// reply the Transport quotes in its error: the request URI, query
// included).
func echoRequestLine(t *testing.T) string {
	t.Helper()
	return testserver.Raw(t, func(c net.Conn) {
		line, err := bufio.NewReader(io.LimitReader(c, 64<<10)).ReadString('\n')
		if err != nil {
			return
		}
		io.WriteString(c, strings.TrimRight(line, "\r\n")+"\r\n\r\n")
		io.Copy(io.Discard, c) // until the client hangs up
	}).Addr().String()
}

var secretsExpvarSeq atomic.Int64

// TestSecretsNeverLeak sends requests carrying a password, query values
// (one written escaped) and credential headers through the tracer and the
// pool — to a server that answers, to a refused port, and to a server whose
// reply makes the Transport quote the request line — and looks for the
// secrets in every output: the slog observer (text and JSON handlers),
// JSON Lines, the waterfall, Timeline.MarshalJSON, the timelines' recorded
// headers, the pool's debug handler (JSON, text and its page) and expvar
// snapshot, Pool.Check's errors while a body is open, the audit reports
// (text, JSON, JUnit) of results holding those timelines, the probe's
// reports (text and JSON with timelines), the pictures (the pages and
// trace-events files of trace, probe and scenarios, serve's page of a kit
// that quotes the secrets), each as written and decoded, and the redacted
// error messages of each failure. It also checks that the non-secret parts (host, path, the query key, the
// header names) do appear, so that it cannot pass by finding nothing.
func TestSecretsNeverLeak(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer ok.Close()
	okHost := ok.Listener.Addr().String()
	echoHost := echoRequestLine(t)
	refusedHost := testserver.ClosedPort(t)

	var out outputs
	var logMu sync.Mutex
	slogText, err := httptrace.NewSlogObserver(slog.New(slog.NewTextHandler(lockedWriter{&logMu, out.buf("slog text")}, nil)),
		slog.LevelInfo, slog.LevelWarn)
	require.NoError(t, err)
	slogJSON, err := httptrace.NewSlogObserver(slog.New(slog.NewJSONHandler(lockedWriter{&logMu, out.buf("slog json")}, nil)),
		slog.LevelInfo, slog.LevelWarn)
	require.NoError(t, err)
	lines, err := httptrace.NewJSONLines(lockedWriter{&logMu, out.buf("json lines")})
	require.NoError(t, err)
	col := &httptrace.Collector{}
	observers := httptrace.Multi(col, slogText, slogJSON, lines)

	// The tracer alone, recording the credential headers (masked).
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := httptrace.NewTransport(base, httptrace.WithObserver(observers), httptrace.Headers("Authorization", "Cookie"))
	require.NoError(t, err)
	// The pool, with its own outputs.
	p, err := pool.New(pool.MaxConnsPerHost(1), pool.WithObserver(observers), pool.CaptureStacks(), pool.Protocols(protocols(false)))
	require.NoError(t, err)
	defer p.Close()

	ctx := bounded(t)
	type target struct {
		name, host string
		wantErr    bool
	}
	targets := []target{{"ok", okHost, false}, {"echo", echoHost, true}, {"refused", refusedHost, true}}
	for _, client := range []struct {
		name string
		c    *http.Client
	}{{"tracer", &http.Client{Transport: tr}}, {"pool", p.Client()}} {
		for _, tg := range targets {
			for _, headers := range []bool{true, false} { // without: http.Client sends Basic credentials
				req := secretRequest(t, ctx, secretURL("http", tg.host), headers)
				resp, err := client.c.Do(req)
				if tg.wantErr {
					require.Error(t, err, "%s %s", client.name, tg.name)
					msg := redact.Error(err, req.URL)
					out.add("client errors", msg)
					require.Contains(t, msg, tg.host, "the redacted error still names the host")
					continue
				}
				require.NoError(t, err)
				if client.name == "pool" && headers {
					// With the body open: the pool's own outputs.
					rec := httptest.NewRecorder()
					p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool", nil))
					out.add("pool handler json", rec.Body.String())
					rec = httptest.NewRecorder()
					p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=text", nil))
					out.add("pool handler text", rec.Body.String())
					rec = httptest.NewRecorder()
					r := httptest.NewRequest(http.MethodGet, "/debug/connpool", nil)
					r.Header.Set("Accept", "text/plain")
					p.Handler().ServeHTTP(rec, r)
					out.add("pool handler text", rec.Body.String())
					out.addPoolPage(t, p)
					name := fmt.Sprintf("connaudit-secrets-%d", secretsExpvarSeq.Add(1))
					require.NoError(t, p.Publish(name))
					out.add("pool expvar", expvar.Get(name).String())
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					cerr := p.Check(cctx)
					cancel()
					require.Error(t, cerr, "an open body is a problem")
					out.add("pool check", cerr.Error())
					ob := p.OpenBodies()
					require.Len(t, ob, 1)
					out.add("pool open bodies", fmt.Sprintf("%+v", ob))
				}
				_, err = io.Copy(io.Discard, resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
			}
		}
	}
	require.NoError(t, p.Check(ctx))
	require.NoError(t, lines.Err())
	out.addPoolPage(t, p) // its connections closed, with their reasons

	// Every timeline, through every way of writing one.
	tls := col.Timelines()
	require.Len(t, tls, 12, "2 clients × 3 targets × with and without headers")
	var withHeader int
	for _, tl := range tls {
		var w strings.Builder
		require.NoError(t, tl.WriteText(&w, true))
		out.add("waterfall", w.String())
		b, err := json.Marshal(tl)
		require.NoError(t, err)
		out.add("timeline json", string(b))
		out.add("timeline url", tl.URL())
		out.add("timeline header", fmt.Sprint(tl.Header))
		out.addTracePictures(t, tl)
		if tl.Outcome.Err != nil {
			u := tl.RawURL()
			out.add("timeline errors", redact.Error(tl.Outcome.Err, &u))
		}
		for _, e := range tl.Events {
			if e.Err != nil {
				u := tl.RawURL()
				out.add("timeline errors", redact.Error(e.Err, &u))
			}
		}
		if tl.Header["Authorization"] != "" {
			withHeader++
		}
	}
	require.Equal(t, 6, withHeader, "the tracer recorded the Authorization header of its 6 requests (masked)")

	// The audit reports of results holding these timelines.
	var rep audit.Report
	for i, tl := range tls {
		u := tl.RawURL()
		obs := audit.Observed{Class: tl.Outcome.Class, Stage: tl.Outcome.Stage, Status: tl.Status, Timeline: tl,
			Error: redact.Error(tl.Outcome.Err, &u)}
		rep.Results = append(rep.Results, audit.Result{Name: fmt.Sprintf("secrets-%d", i), Proto: audit.HTTP1,
			Expected: audit.Expect{Class: vocab.ClassOK}, Observed: obs, Mismatches: []string{"class: " + string(tl.Outcome.Class) + ": " + obs.Error}})
		rep.Failed++
	}
	out.addReport(t, &rep)
	out.addScenarioPictures(t, rep)
	var b bytes.Buffer

	// The probe, against the server that answers and the refused port.
	for _, tg := range []target{{"ok", okHost, false}, {"refused", refusedHost, true}} {
		req := secretRequest(t, ctx, secretURL("http", tg.host), true)
		prep, err := probe.Run(ctx, req, probe.Requests(3), probe.KeepTimelines(), probe.Timeout(5*time.Second))
		if tg.wantErr {
			var unusable *probe.UnusableError
			require.ErrorAs(t, err, &unusable)
			out.add("probe errors", err.Error())
		} else {
			require.NoError(t, err)
		}
		require.NotNil(t, prep)
		b.Reset()
		require.NoError(t, prep.WriteText(&b, true))
		out.add("probe text", b.String())
		b.Reset()
		require.NoError(t, prep.WriteJSON(&b))
		out.add("probe json", b.String())
		out.addProbePictures(t, req, prep)
	}

	// A serve session whose kit quotes the secrets.
	out.addServePage(t)

	// A URL that does not parse: its error quotes it whole.
	_, perr := url.Parse(secretURL("http", "127.0.0.1:bad"))
	require.Error(t, perr)
	out.add("malformed url", redact.URLString(secretURL("http", "127.0.0.1:bad")))

	// Nothing secret anywhere; the rest where it belongs.
	for name, buf := range out.text {
		s := buf.String()
		require.NotEmpty(t, s, name)
		for _, secret := range secretValues {
			require.NotContains(t, s, secret, "%s shows a secret:\n%s", name, s)
		}
	}
	want := map[string][]string{
		"slog text":                      {okHost, secretsPath, "token=REDACTED", "connect-refused", "protocol"},
		"slog json":                      {okHost, secretsPath, "token=REDACTED", "connect-refused", "protocol"},
		"json lines":                     {okHost, echoHost, refusedHost, secretsPath, "token=REDACTED", "session=REDACTED", `"Authorization":"REDACTED"`, `"Cookie":"REDACTED"`},
		"waterfall":                      {okHost, secretsPath, "token=REDACTED", "malformed HTTP status code"},
		"timeline json":                  {okHost, secretsPath, "token=REDACTED", `"Authorization":"REDACTED"`},
		"timeline header":                {"Authorization:REDACTED", "Cookie:REDACTED"},
		"timeline errors":                {"malformed HTTP status code", secretsPath, secretsQueryKey + "=", "connection refused"},
		"client errors":                  {"malformed HTTP status code", secretsPath, "connection refused"},
		"pool handler json":              {okHost, secretsPath, "token=REDACTED"},
		"pool handler text":              {okHost, secretsPath, "token=REDACTED"},
		"pool expvar":                    {okHost, secretsPath, "token=REDACTED"},
		"pool check":                     {"open body", okHost, secretsPath, "token=REDACTED"},
		"audit text":                     {okHost, secretsPath, "token=REDACTED"},
		"audit json":                     {okHost, secretsPath, "token=REDACTED"},
		"audit junit":                    {okHost, secretsPath, "token=REDACTED"},
		"probe text":                     {okHost, secretsPath, "token=REDACTED"},
		"probe json":                     {okHost, secretsPath, "token=REDACTED"},
		"probe errors":                   {"connect-refused"},
		"malformed url":                  {redact.Masked},
		"pool handler html decoded":      {okHost, "active"},
		"trace html decoded":             {okHost, echoHost, secretsPath, "token=REDACTED", "session=REDACTED", "malformed HTTP status code"},
		"trace trace events decoded":     {okHost, echoHost, secretsPath, "token=REDACTED", "session=REDACTED", "malformed HTTP status code"},
		"scenarios html decoded":         {okHost, secretsPath, "token=REDACTED", "session=REDACTED", "malformed HTTP status code"},
		"scenarios trace events decoded": {okHost, secretsPath, "token=REDACTED", "session=REDACTED", "malformed HTTP status code"},
		"probe html decoded":             {okHost, secretsPath, "token=REDACTED", "session=REDACTED"},
		"probe trace events decoded":     {okHost, secretsPath, "token=REDACTED", "session=REDACTED"},
		"serve html decoded":             {"Bearer REDACTED", "token=REDACTED", "http://REDACTED@"},
	}
	for name, parts := range want {
		require.Contains(t, out.text, name)
		for _, part := range parts {
			require.Contains(t, out.text[name].String(), part, "%s lacks %q", name, part)

		}
	}
}

// addServePage adds the page connaudit serve -html draws of a session
// whose kit quotes the secrets in its client's name and version and in
// the error it reports for a scenario, which the verdict's mismatch
// quotes.
func (o *outputs) addServePage(t *testing.T) {
	t.Helper()
	srv, err := serve.New()
	require.NoError(t, err)
	defer srv.Close()
	ctx := bounded(t)
	call := func(url string, body, into any) {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		if body == nil {
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		}
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		rb, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, "%s: %s", url, rb)
		if into != nil {
			require.NoError(t, json.Unmarshal(rb, into), "%s", rb)
		}
	}
	quoted := "Bearer " + secretBearer + " " + secretURL("http", "127.0.0.1:1") + " Cookie: id=" + secretCookie
	var opened serve.Opened
	call(srv.URL()+"/v1/sessions", serve.OpenRequest{Protocol: serve.Protocol, Kit: "kit",
		Client: serve.Client{Name: "client Bearer " + secretBearer, Version: "1 token=" + secretToken}}, &opened)
	var list serve.Scenarios
	call(opened.ScenariosURL, nil, &list)
	require.NotEmpty(t, list.Scenarios)
	call(opened.ReportURL, serve.KitReport{Scenario: list.Scenarios[0].Name,
		Outcome: &serve.Outcome{Error: &serve.ErrorOutcome{Kind: "connection", Message: quoted}}}, nil)
	var rep serve.SessionReport
	call(opened.DoneURL, serve.Done{}, &rep)
	sets := pictures.Session(&rep)
	require.NotEmpty(t, sets)
	o.addPage(t, "serve html", picture.Page{Title: "connaudit serve", Sets: sets})
}

// echoEscaped starts a raw server on loopback that answers each request
// with its own head, escaped as escape says, as its status line: net/http
// quotes it (%q) in its error, so a secret reaches the error text escaped
// twice.
func echoEscaped(t *testing.T, escape func(string) string) string {
	t.Helper()
	return testserver.Raw(t, func(c net.Conn) {
		br := bufio.NewReader(io.LimitReader(c, 64<<10))
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
			head.WriteString(line)
		}
		io.WriteString(c, escape(head.String())+"\r\n\r\n")
		io.Copy(io.Discard, c)
	}).Addr().String()
}

// TestSecretsEchoedEscaped: secrets with bytes that escape (a quote, a
// backslash, a tab, a byte that is not UTF-8, a C1 control, '<' and '&',
// a space), in the URL's password and query and in a header declared
// secret, sent through the pool to servers that echo the request back
// Go-quoted, JSON-escaped and percent-encoded, never show, in any of those
// forms or as the outputs write them, in the slog records, JSON Lines, the
// waterfall, the timeline's JSON, the pool's text and HTML pages, the
// audit's reports, the probe's reports or the pictures of trace, probe and
// scenarios.
func TestSecretsEchoedEscaped(t *testing.T) {
	const (
		password = `pa"ss\w0rd`
		token    = "t0k<en>&\tx"
		apiKey   = "k3y\xff\u009bSE\"CRET"
	)
	quote := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	jsonEsc := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	hosts := map[string]string{
		"quoted":          echoEscaped(t, quote),
		"json":            echoEscaped(t, jsonEsc),
		"percent-encoded": echoEscaped(t, url.QueryEscape),
	}
	var out outputs
	var logMu sync.Mutex
	slogText, err := httptrace.NewSlogObserver(slog.New(slog.NewTextHandler(lockedWriter{&logMu, out.buf("slog text")}, nil)), slog.LevelInfo, slog.LevelWarn)
	require.NoError(t, err)
	slogJSON, err := httptrace.NewSlogObserver(slog.New(slog.NewJSONHandler(lockedWriter{&logMu, out.buf("slog json")}, nil)), slog.LevelInfo, slog.LevelWarn)
	require.NoError(t, err)
	lines, err := httptrace.NewJSONLines(lockedWriter{&logMu, out.buf("json lines")})
	require.NoError(t, err)
	col := &httptrace.Collector{}
	p, err := pool.New(pool.WithObserver(httptrace.Multi(col, slogText, slogJSON, lines)), pool.SecretHeaders("x-api-key"),
		pool.Protocols(protocols(false)))
	require.NoError(t, err)
	defer p.Close()
	ctx := bounded(t)
	build := func(host string) *http.Request {
		u := &url.URL{Scheme: "http", Host: host, Path: secretsPath, User: url.UserPassword(secretUserName, password),
			RawQuery: url.Values{secretsQueryKey: {token}}.Encode()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", apiKey)
		return req
	}
	for name, host := range hosts {
		_, err := p.Client().Do(build(host))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "malformed HTTP", name)
	}
	require.NoError(t, p.Check(ctx))
	var rep audit.Report
	for i, tl := range col.Timelines() {
		var w strings.Builder
		require.NoError(t, tl.WriteText(&w, true))
		out.add("waterfall", w.String())
		b, err := json.Marshal(tl)
		require.NoError(t, err)
		out.add("timeline json", string(b))
		out.addTracePictures(t, tl)
		obs := audit.Observed{Class: tl.Outcome.Class, Stage: tl.Outcome.Stage, Timeline: tl, Error: tl.RedactError(tl.Outcome.Err)}
		rep.Results = append(rep.Results, audit.Result{Name: fmt.Sprintf("echo-%d", i), Proto: audit.HTTP1,
			Expected: audit.Expect{Class: vocab.ClassOK}, Observed: obs, Mismatches: []string{"class: " + obs.Error}})
	}
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=text", nil))
	out.add("pool handler text", rec.Body.String())
	out.addPoolPage(t, p)
	out.addReport(t, &rep)
	out.addScenarioPictures(t, rep)
	var b bytes.Buffer
	for name, host := range hosts {
		req := build(host)
		prep, err := probe.Run(ctx, req, probe.Requests(2), probe.KeepTimelines())
		var unusable *probe.UnusableError
		require.ErrorAs(t, err, &unusable, name)
		out.add("probe errors", err.Error())
		b.Reset()
		require.NoError(t, prep.WriteText(&b, true))
		out.add("probe text", b.String())
		b.Reset()
		require.NoError(t, prep.WriteJSON(&b))
		out.add("probe json", b.String())
		out.addProbePictures(t, req, prep)
	}

	// Each secret as the servers escaped it, then as net/http quoted that,
	// then as an output wrote it: as it is, escaped for a terminal, in
	// JSON, Go-quoted, in HTML (as html/template writes a text, and as
	// html.EscapeString does).
	htmlText := template.Must(template.New("").Parse("{{.}}"))
	htmlEsc := func(s string) string {
		var b strings.Builder
		require.NoError(t, htmlText.Execute(&b, s))
		return b.String()
	}
	var forms []string
	for _, s := range []string{password, token, apiKey, secretUserName} {
		for _, server := range []string{s, quote(s), jsonEsc(s), url.QueryEscape(s)} {
			for _, quoted := range []string{server, quote(server)} {
				for _, shown := range []string{quoted, redact.Printable(quoted)} {
					forms = append(forms, shown, jsonEsc(shown), quote(shown), htmlEsc(shown), html.EscapeString(shown))
				}
			}
		}
	}
	for name, buf := range out.text {
		s := buf.String()
		require.NotEmpty(t, s, name)
		for _, f := range forms {
			require.NotContains(t, s, f, "%s shows a secret as %q:\n%s", name, f, s)
		}
	}
	for _, name := range []string{"waterfall", "timeline json", "probe text", "audit text", "json lines",
		"trace html decoded", "trace trace events decoded", "scenarios html decoded", "scenarios trace events decoded",
		"probe html decoded", "probe trace events decoded"} {
		require.Contains(t, out.text[name].String(), secretsPath, name)
		require.Contains(t, out.text[name].String(), "malformed HTTP", name)
	}
}

// proxySecretUpstream is the secret the upstream's URL carries in its
// query, which the proxy merges into every request it forwards.
const proxySecretUpstream = "Upstr3amKeyValue"

// TestSecretsProxy sends requests carrying a user and password in the
// request target (absolute form), query values (one escaped),
// Authorization, Cookie and a header named secret (in another letter
// case each time) through connaudit's proxy — to an upstream that answers,
// and to upstreams that echo the request's head back as is, Go-quoted,
// JSON-escaped and percent-encoded, which the proxy quotes in its 502 —
// with the upstream's URL carrying a secret of its own, a client header
// quoting a bearer token, one named secret, and a replay of a write whose
// path the verdict quotes; and looks for the secrets in every output of
// the proxy: the report as text, JSON and JUnit, the live line, the 502s'
// bodies and New's errors for an upstream URL with user information, one
// that does not parse, and one with a bad scheme.
func TestSecretsProxy(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer ok.Close()
	quote := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	jsonEsc := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	upstreams := map[string]string{
		"ok":              ok.Listener.Addr().String(),
		"echo":            echoRequestLine(t),
		"quoted":          echoEscaped(t, quote),
		"json":            echoEscaped(t, jsonEsc),
		"percent-encoded": echoEscaped(t, url.QueryEscape),
	}
	var out outputs
	ctx := bounded(t)
	query := "?" + secretsQueryKey + "=" + secretToken + "&session=" + url.QueryEscape(secretSession)
	for name, host := range upstreams {
		for _, clientHeader := range []string{"X-Client", "x-AUTH-token"} {
			rule, err := proxy.ParseRule("close at=after-upstream method=POST times=1")
			require.NoError(t, err)
			p, err := proxy.New("http://"+host+"/base?up="+proxySecretUpstream, proxy.ClientHeader(clientHeader),
				proxy.Faults(rule))
			require.NoError(t, err)
			require.NoError(t, p.Start())
			tr := &http.Transport{}
			c := &http.Client{Transport: tr}
			send := func(method string, headerCase func(string) string) (int, string, error) {
				req, err := http.NewRequestWithContext(ctx, method, p.URL()+secretsPath+query, strings.NewReader("{}"))
				require.NoError(t, err)
				req.Header[headerCase("Authorization")] = []string{"Bearer " + secretBearer}
				req.Header[headerCase("Cookie")] = []string{"id=" + secretCookie}
				req.Header[headerCase("X-Api-Key")] = []string{secretPassword}
				req.Header.Set(clientHeader, "Bearer "+secretBearer)
				resp, err := c.Do(req)
				if err != nil {
					return 0, "", err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b), err
			}
			for _, hc := range []func(string) string{strings.ToLower, strings.ToUpper, textproto.CanonicalMIMEHeaderKey} {
				status, body, err := send(http.MethodGet, hc)
				require.NoError(t, err, name)
				if name == "ok" {
					require.Equal(t, http.StatusOK, status)
				} else {
					require.Equal(t, http.StatusBadGateway, status, name)
					out.add("proxy 502 body", body)
				}
			}
			if name == "ok" {
				// A write the upstream processed, its response dropped
				// (the transport does not send a POST again), sent again.
				for range 2 {
					if _, _, err := send(http.MethodPost, textproto.CanonicalMIMEHeaderKey); err == nil {
						break
					}
				}
				// The user and password in an absolute-form target.
				conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
				require.NoError(t, err)
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
					secretURL("http", strings.TrimPrefix(p.URL(), "http://")))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
				conn.Close()
			}
			line, _ := p.Live()
			out.add("proxy live", line)
			tr.CloseIdleConnections()
			require.NoError(t, p.Close())
			rep := p.Report()
			var b bytes.Buffer
			require.NoError(t, rep.WriteText(&b))
			out.add("proxy text", b.String())
			b.Reset()
			require.NoError(t, rep.WriteJSON(&b))
			out.add("proxy json", b.String())
			out.addJSONDecoded("proxy json decoded", b.Bytes())
			b.Reset()
			require.NoError(t, rep.WriteJUnit(&b))
			out.add("proxy junit", b.String())
			out.add("proxy junit decoded", html.UnescapeString(b.String()))
			if name == "ok" && clientHeader == "X-Client" {
				require.True(t, rep.Failed(), "the write committed twice fails its verdict")
			}
		}
	}
	for _, upstream := range []string{
		secretURL("http", "127.0.0.1:1"),   // user information
		secretURL("http", "127.0.0.1:bad"), // does not parse
		secretURL("ftp", "127.0.0.1:1"),    // not http
	} {
		_, err := proxy.New(upstream)
		require.Error(t, err)
		out.add("proxy errors", err.Error())
	}

	// Each secret as sent and as an upstream escaped it, then as net/http
	// quoted that, then as an output wrote it.
	var forms []string
	for _, s := range append(slices.Clone(secretValues), proxySecretUpstream) {
		for _, server := range []string{s, quote(s), jsonEsc(s), url.QueryEscape(s)} {
			for _, quoted := range []string{server, quote(server)} {
				forms = append(forms, quoted, jsonEsc(quoted), html.EscapeString(quoted))
			}
		}
	}
	for name, buf := range out.text {
		s := buf.String()
		require.NotEmpty(t, s, name)
		for _, f := range forms {
			require.NotContains(t, s, f, "%s shows a secret as %q:\n%s", name, f, s)
		}
	}
	for name, parts := range map[string][]string{
		"proxy text":         {"up=REDACTED", "  Bearer REDACTED ", "\n  REDACTED ", "write-committed-twice", secretsPath, "token=REDACTED"},
		"proxy json decoded": {"up=REDACTED", secretsPath, "token=REDACTED", "session=REDACTED"},
		"proxy junit":        {secretsPath, "token=REDACTED"},
		"proxy live":         {"requests"},
		"proxy 502 body":     {"malformed HTTP", "REDACTED"},
		"proxy errors":       {"user information", redact.Masked},
	} {
		for _, part := range parts {
			require.Contains(t, out.text[name].String(), part, "%s lacks %q", name, part)
		}
	}
}

// addJSONDecoded adds a JSON document's strings decoded, one a line.
func (o *outputs) addJSONDecoded(name string, doc []byte) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if s, ok := tok.(string); ok {
			o.add(name, s)
		}
	}
}
