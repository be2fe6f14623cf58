package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// fuzzEchoBound bounds each run against the echo server, which answers at
// once: only a hang would reach it.
const fuzzEchoBound = 10 * time.Second

// secretMark surrounds the fuzzed bytes of a secret, so that every form of
// it is unlike any text an output shows of its own (a timing, a count, a
// port).
const secretMark = "sKy"

// fuzzEcho decodes a fuzz input: the secret (its fuzzed bytes, marked, and
// for a header what a header value can hold) and how the server echoes it.
func fuzzEcho(raw string, how uint16) (string, echo) {
	e := echo{carry: int(how) % carries, form: int(how/carries) % forms, place: int(how/(carries*forms)) % places}
	if len(raw) > 48 {
		raw = raw[:48]
	}
	switch e.carry {
	case carryHeader, carryBearer, carryCookie:
		raw = headerSafe(raw)
		if e.carry == carryCookie {
			// A cookie's value ends at ';'.
			raw = strings.ReplaceAll(raw, ";", "")
		}
	}
	return secretMark + raw + "yKs", e
}

// FuzzSecretsEchoed plants a secret of fuzzed bytes in a request (a header
// named secret, a bearer token, a cookie, the URL's password or user name,
// the Basic credentials made of them, a query value, a query key written
// alone), has a loopback server echo it back in a form (as it came,
// Go-quoted, JSON-escaped, percent-encoded) and a place (the status line,
// the status code, a malformed header line, valid headers and the
// Keep-Alive header the probe quotes, a trailer and a malformed one, a
// Location that does not parse, a 500's body read as the next response,
// an HTTP/2 GOAWAY's debug data), and looks for the secret, in every form it
// could take on the way (see secretForms), in every output: trace's and
// probe's stdout and stderr (text, -json, -v, -v -json), and the library's
// slog records (text and JSON handlers), JSON Lines, waterfalls, timeline
// JSON, the pool's debug page (JSON and text) and the audit's reports
// (text, JSON, JUnit) of the timelines. Invariants: nothing panics, every
// run ends with an exit status of 0 to 3, and no output holds the secret;
// the host and path do appear.
func FuzzSecretsEchoed(f *testing.F) {
	for _, seed := range []struct {
		raw   string
		carry int
	}{
		{`SEKRET\zz`, carryHeader},
		{`SE"K\t`, carryHeader},
		{"SE\tK", carryBearer},
		{"SE\xffK", carryHeader},
		{"SE\u009bK", carryCookie},
		{`pw"x\y`, carryPassword},
		{"us/er:@", carryUser},
		{"to ken+/=", carryQuery},
		{"b<a>r&e", carryBareKey},
		{"é✓\U0001F600", carryBasic},
	} {
		for place := range places {
			for _, form := range []int{formRaw, formQuote} {
				f.Add(seed.raw, uint16(seed.carry+form*carries+place*carries*forms))
			}
		}
	}
	srv := newEchoServer(f)
	f.Cleanup(srv.Close)
	// net/http logs the bytes a server sends when no response is due
	// (the error body's), as run does not let it: not on the test's output.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	f.Fuzz(func(t *testing.T, raw string, how uint16) {
		secret, e := fuzzEcho(raw, how)
		srv.set(e)
		headers, target := plant(secret, e.carry, srv.URL(e.place))
		var outs []string
		for _, cmd := range [][]string{
			{"trace"},
			{"trace", "-json"},
			{"probe", "-n", "2", "-v", "-fail-on", "none"},
			{"probe", "-n", "2", "-v", "-json", "-fail-on", "none"},
		} {
			args := append([]string{}, cmd...)
			if e.place == placeGoAway {
				args = append(args, "-k")
			}
			args = append(append(args, headers...), target)
			ctx, cancel := context.WithTimeout(context.Background(), fuzzEchoBound)
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, &stdout, &stderr)
			cancel()
			if code < exitOK || code > exitUnreachable {
				t.Fatalf("%s: %q exited %d", e, args, code)
			}
			outs = append(outs, "stdout:\n"+stdout.String(), "stderr:\n"+stderr.String())
		}
		outs = append(outs, libraryOutputs(t, e, headers, target)...)
		all := strings.Join(outs, "\n")
		for _, form := range secretForms(secret, e.carry) {
			for _, out := range outs {
				if strings.Contains(out, form) {
					t.Fatalf("%s: secret %q shows as %q in %s", e, secret, form, out)
				}
			}
		}
		host := strings.TrimPrefix(strings.TrimPrefix(srv.URL(e.place), "http://"), "https://")
		for _, want := range []string{host, "/api/items"} {
			if !strings.Contains(all, want) {
				t.Fatalf("%s: no output names %q: the check would pass by finding nothing:\n%s", e, want, all)
			}
		}
	})
}

// libraryOutputs sends two requests to target with the header flags given
// through a pool with slog, JSON Lines and collecting observers, and
// returns what each of the library's outputs wrote of them.
func libraryOutputs(t *testing.T, e echo, headers []string, target string) []string {
	t.Helper()
	var (
		mu       sync.Mutex
		slogText bytes.Buffer
		slogJSON bytes.Buffer
		lines    bytes.Buffer
	)
	locked := func(w io.Writer) io.Writer { return lockedWriter{&mu, w} }
	col := &httptrace.Collector{}
	jl, err := httptrace.NewJSONLines(locked(&lines))
	if err != nil {
		t.Fatal(err)
	}
	st, err := httptrace.NewSlogObserver(slog.New(slog.NewTextHandler(locked(&slogText), nil)), slog.LevelInfo, slog.LevelWarn)
	if err != nil {
		t.Fatal(err)
	}
	sj, err := httptrace.NewSlogObserver(slog.New(slog.NewJSONHandler(locked(&slogJSON), nil)), slog.LevelInfo, slog.LevelWarn)
	if err != nil {
		t.Fatal(err)
	}
	var rf requestFlags
	for i := 1; i < len(headers); i += 2 {
		rf.headers = append(rf.headers, headers[i])
	}
	opts := append(rf.poolOptions(), pool.WithObserver(httptrace.Multi(col, jl, st, sj)), pool.CaptureStacks(),
		pool.TLSClientConfig(&tls.Config{InsecureSkipVerify: true}), pool.ConnectTimeout(fuzzEchoBound)) //nolint:gosec // the echo server's own certificate
	p, err := pool.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: p.RoundTripper(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	var outs []string
	page := func() {
		for _, q := range []string{"", "?format=text"} {
			rec := httptest.NewRecorder()
			p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool"+q, nil))
			outs = append(outs, "debug page:\n"+rec.Body.String())
		}
	}
	rf.timeout = fuzzEchoBound
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), fuzzEchoBound)
		req, err := rf.request(ctx, target)
		if err != nil {
			cancel()
			t.Fatalf("%s: building the request: %v", e, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			outs = append(outs, "client error: "+rf.redact(err, req))
		} else {
			page() // with the body open
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
	}
	page()
	var rep audit.Report
	for i, tl := range col.Timelines() {
		var w strings.Builder
		if err := tl.WriteText(&w, true); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(tl)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, "waterfall:\n"+w.String(), "timeline JSON:\n"+string(b))
		obs := audit.Observed{Class: tl.Outcome.Class, Stage: tl.Outcome.Stage, Status: tl.Status, Timeline: tl,
			Error: tl.RedactError(tl.Outcome.Err)}
		rep.Results = append(rep.Results, audit.Result{Name: fmt.Sprintf("echo-%d", i), Proto: audit.HTTP1,
			Expected: audit.Expect{Class: vocab.ClassOK}, Observed: obs, Mismatches: []string{"class: " + obs.Error}})
		rep.Failed++
	}
	var b bytes.Buffer
	for name, write := range map[string]func(io.Writer) error{
		"audit text": func(w io.Writer) error { return rep.WriteText(w, true) },
		"audit JSON": rep.WriteJSON,
		"JUnit":      rep.WriteJUnit,
	} {
		b.Reset()
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, name+":\n"+b.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return append(outs, "slog text:\n"+slogText.String(), "slog JSON:\n"+slogJSON.String(), "JSON Lines:\n"+lines.String(),
		"masked header: "+redact.Masked)
}

// lockedWriter serialises the writes of observers that may run at once.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
