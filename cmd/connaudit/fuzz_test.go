package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"
)

// fuzzSecrets returns what must never be printed of raw: the password and
// the query values, as written in raw and decoded, 4 bytes or longer. It
// finds them by hand, so also in a URL that does not parse: the password
// is what follows the first ':' of the text before the last '@' of the
// authority; the query values follow '=' in the pairs after '?'.
func fuzzSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
			if d, err := url.QueryUnescape(s); err == nil && d != s && len(d) >= 4 {
				out = append(out, d)
			}
		}
	}
	rest := raw
	if i := strings.Index(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	rest, query, _ := strings.Cut(rest, "?")
	if _, after, ok := strings.Cut(rest, "//"); ok {
		auth := after
		if i := strings.IndexAny(auth, "/"); i >= 0 {
			auth = auth[:i]
		}
		if i := strings.LastIndex(auth, "@"); i >= 0 {
			if _, pw, ok := strings.Cut(auth[:i], ":"); ok {
				add(pw)
			}
		}
	}
	for _, pair := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		if _, v, ok := strings.Cut(pair, "="); ok {
			add(v)
		}
	}
	return out
}

// fuzzURLPublic returns what output may show of raw if it is a URL: its
// scheme, host, port and path, its query keys, the whole of it redacted.
func fuzzURLPublic(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, " %s %s %s %s %s %q", u.Scheme, u.Host, u.EscapedPath(), u.Path, redact.URL(u), u.Scheme)
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, _, _ := strings.Cut(pair, "=")
		b.WriteString(" " + k)
		if d, err := url.QueryUnescape(k); err == nil {
			b.WriteString(" " + d)
		}
	}
	return b.String()
}

// FuzzParseTarget checks the URL argument of trace and probe. Invariants:
// parseTarget never panics; a URL it accepts is http or https with a host
// and a port, if any, in 1..65535, and the request the flags build for it
// carries that URL and can be written (unless net/url cannot parse back
// the URL it printed: then building it fails, as a usage error); its
// errors never quote the password or a query value (4 bytes or more,
// unless the same text is also part of the URL's scheme, host, port or
// path, which an error may name).
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:8080/p?token=T0kenValue",
		"https://user:S3cr3tPassw0rd@localhost/",
		"http://[::1]:80/",
		"http://[fe80::1%25lo]:80/",
		"http://127.0.0.1:0/",
		"http://127.0.0.1:99999/",
		"http://127.0.0.1:/",
		"http://:80/",
		"ftp://127.0.0.1/",
		"127.0.0.1:80",
		"//127.0.0.1/",
		"http:opaque",
		"http://u:pa%zzss@127.0.0.1/",
		"http://u:p@ss@127.0.0.1/?t=%zz",
		"HTTP://127.0.0.1/",
		"http://a%20b/",
		"http://127.0.0.1/\x7f",
		"http://user:S3cr3t@127.0.0.1:8x/",
		"http://b\u00fccher.example/",
		"http://\u2488.example/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseTarget(raw)
		if err != nil {
			msg := err.Error()
			public := fuzzURLPublic(raw) // what an error may name
			for _, s := range fuzzSecrets(raw) {
				if strings.Contains(msg, s) && !strings.Contains(public, s) && !strings.Contains("REDACTED", s) {
					t.Fatalf("parseTarget(%q) error quotes secret %q: %s", raw, s, msg)
				}
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("parseTarget(%q) accepted scheme %q", raw, u.Scheme)
		}
		if u.Host == "" || u.Hostname() == "" {
			t.Fatalf("parseTarget(%q) accepted a URL with no host", raw)
		}
		// net/http dials the ASCII form of a host name that is not
		// ASCII: a host with none would fail every request.
		if _, err := idna.Lookup.ToASCII(u.Hostname()); err != nil && !isASCII(u.Hostname()) {
			t.Fatalf("parseTarget(%q) accepted host %q, which has no ASCII form: %v", raw, u.Hostname(), err)
		}
		if p := u.Port(); p != "" {
			n := 0
			for _, c := range p {
				if c < '0' || c > '9' || n > 65535 {
					t.Fatalf("parseTarget(%q) accepted port %q", raw, p)
				}
				n = n*10 + int(c-'0')
			}
			if n < 1 || n > 65535 {
				t.Fatalf("parseTarget(%q) accepted port %q", raw, p)
			}
		}
		rf := requestFlags{timeout: defaultTimeout}
		req, err := rf.request(context.Background(), raw)
		if err != nil {
			// net/url parses some URLs whose String() it cannot parse back
			// ("http://[::%25\x87]" becomes "http://[::%25%87]"): request
			// then fails, a usage error like parseTarget's own. Any other
			// failure is a URL parseTarget should have refused.
			if _, perr := url.Parse(u.String()); perr == nil {
				t.Fatalf("parseTarget(%q) accepted it, but building the request failed: %v", raw, err)
			}
			return
		}
		// http.NewRequest drops an empty port ("host:").
		if req.URL.Scheme != u.Scheme || req.URL.Host != strings.TrimSuffix(u.Host, ":") {
			t.Fatalf("parseTarget(%q): the request goes to %s://%s, not %s://%s", raw, req.URL.Scheme, req.URL.Host, u.Scheme, u.Host)
		}
		if err := req.Write(io.Discard); err != nil {
			t.Fatalf("parseTarget(%q) accepted it, but the request cannot be written: %v", raw, err)
		}
	})
}

// FuzzParseHeader checks the -H flag. Invariants: parseHeader never
// panics; it accepts exactly "Name: value" with a valid field name and
// value (httpguts), both trimmed; the flag's Set never fails (the flag
// package would quote the value) and the flags' validate agrees with
// parseHeader; no error quotes the value (header values are never
// printed); a request built with an accepted header can be written.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{
		"Authorization: Bearer B3arerValue",
		"Cookie: id=C00kieValue",
		"X-Empty:",
		"  X-Spaces  :   v  ",
		"no colon",
		": value",
		"Bad Name: v",
		"X-Ctl: a\x00b",
		"X-Ctl: a\r\nInjected: 1",
		"Host: 127.0.0.1:8080",
		"Host: a b",
		"X-Utf8: h\xc3\xa9",
		"X:a:b:c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		name, value, err := parseHeader(v)
		var h headerFlags
		if serr := h.Set(v); serr != nil {
			t.Fatalf("Set(%q) = %v: the flag package would print the value", v, serr)
		}
		rf := requestFlags{timeout: defaultTimeout, headers: h}
		verr := rf.validate()
		if (verr == nil) != (err == nil) {
			t.Fatalf("validate() = %v but parseHeader(%q): %v", verr, v, err)
		}
		_, rawValue, hasColon := strings.Cut(v, ":")
		if err != nil {
			rawValue = strings.TrimSpace(rawValue)
			rawName, _, _ := strings.Cut(v, ":")
			public := rawName + fmt.Sprintf(" %q ", strings.TrimSpace(rawName)) + `-H: header must be "Name: value" invalid header name for`
			for _, e := range []error{err, verr} {
				if len(rawValue) >= 3 && strings.Contains(e.Error(), rawValue) && !strings.Contains(public, rawValue) {
					t.Fatalf("parseHeader(%q) error quotes the value: %v", v, e)
				}
			}
			return
		}
		if !hasColon {
			t.Fatalf("parseHeader(%q) accepted a header with no colon", v)
		}
		if !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value) {
			t.Fatalf("parseHeader(%q) accepted an invalid header %q: %q", v, name, value)
		}
		if name != strings.TrimSpace(name) || value != strings.TrimSpace(value) || name == "" {
			t.Fatalf("parseHeader(%q) = %q, %q: not trimmed", v, name, value)
		}
		req, err := rf.request(context.Background(), "http://127.0.0.1:1/")
		if err != nil {
			t.Fatalf("an accepted header %q made the request fail: %v", v, err)
		}
		if err := req.Write(io.Discard); err != nil {
			t.Fatalf("with the accepted header %q the request cannot be written: %v", v, err)
		}
	})
}

// fuzzLoopback is where FuzzRun's requests go: a loopback port on which
// nothing listens (port 1, tcpmux, is never served on a test machine), so
// a connect is refused at once and nothing leaves the machine.
const fuzzLoopback = "127.0.0.1:1"

// fuzzArgs turns fuzz text into trace's arguments, split on NUL, and
// defuses them: every argument (not a flag's value) that trace would take
// for its URL is sent to fuzzLoopback instead, and -d @file (which reads a
// file, perhaps /dev/zero or a FIFO) reads no file. The arguments come
// back as trace parses them: the flags, then "--" and the arguments.
func fuzzArgs(s string) []string {
	args := strings.Split(s, "\x00")
	if len(args) > 16 {
		args = args[:16]
	}
	fs, _, _ := newTraceFlags(io.Discard, io.Discard)
	args = interleave(fs.FlagSet, args)
	positional := false
	for i, a := range args {
		if !positional && a == "--" {
			positional = true
			continue
		}
		if u, err := parseTarget(a); positional && err == nil {
			u.Host = fuzzLoopback
			a = u.String()
			if v, err := parseTarget(a); err != nil || v.Host != fuzzLoopback {
				a = "http://" + fuzzLoopback + "/"
			}
		}
		for _, p := range []string{"-d=@", "--d=@"} {
			if rest, ok := strings.CutPrefix(a, p); ok {
				a = p[:len(p)-1] + "_" + rest
			}
		}
		if strings.HasPrefix(a, "@") {
			a = "_" + a[1:]
		}
		args[i] = a
	}
	return args
}

// FuzzRun runs the trace command with fuzzed arguments, all of whose
// targets are a refused loopback port. Invariants: run never panics and
// exits 0 (help only, on stdout), 1 (the request failed), 2 (usage) or 3
// (no response), each failure said on stderr; what it prints never shows
// a password, query value or header value given to it.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:1/",
		"-json\x00http://user:S3cr3tPassw0rd@127.0.0.1:1/p?token=T0kenValue",
		"-H\x00Authorization: Bearer B3arerValue\x00-H\x00Cookie: c=C00kieValue\x00http://127.0.0.1:1/",
		"-X\x00POST\x00-d\x00body\x00https://127.0.0.1:1/",
		"-http2\x00https://127.0.0.1:1/",
		"-http1\x00-k\x00-timeout\x001ms\x00-max-body\x000\x00http://127.0.0.1:1/",
		"-h",
		"",
		"-timeout\x00-1s\x00http://127.0.0.1:1/",
		"-d\x00@/dev/zero\x00http://127.0.0.1:1/",
		"http://127.0.0.1:1/\x00extra",
		"-H\x00Host: a b\x00http://127.0.0.1:1/",
		"http://u:p%zz@127.0.0.1:1/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := fuzzArgs(s)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"trace"}, args...), &stdout, &stderr)
		switch code {
		case exitOK:
			if !strings.Contains(stdout.String(), "usage:") {
				t.Fatalf("trace %q exited 0 with no help printed:\n%s%s", args, stdout.String(), stderr.String())
			}
		case exitFail, exitUsage, exitUnreachable:
			if stderr.Len() == 0 {
				t.Fatalf("trace %q exited %d with nothing on stderr", args, code)
			}
		default:
			t.Fatalf("trace %q exited %d", args, code)
		}
		out := stdout.String() + stderr.String()
		secrets, public := fuzzSecretsOf(args)
		for _, secret := range secrets {
			if strings.Contains(out, secret) && !strings.Contains(public, secret) {
				t.Fatalf("trace %q printed secret %q:\n%s", args, secret, out)
			}
		}
	})
}

// fuzzSecretsOf returns the secrets among trace's arguments, found as the
// flag package parses them (header values of -H, the password and query
// values of the URL, the first argument that is no flag), and the text
// trace may print of them (header names, what a URL shows redacted, the
// other flags and values whole) or anyway.
func fuzzSecretsOf(args []string) ([]string, string) {
	var (
		secrets []string
		public  strings.Builder
	)
	public.WriteString(fuzzFixedText())
	header := func(h string) {
		name, value, _ := strings.Cut(h, ":")
		public.WriteString(" " + name)
		if value = strings.TrimSpace(value); len(value) >= 4 {
			secrets = append(secrets, value)
		}
	}
	valueFlags := map[string]bool{"X": true, "H": true, "d": true, "timeout": true, "max-body": true, "deadline": true}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			break
		}
		if a == "--" {
			i++
			break
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(name, "=")
		switch {
		case name == "H" && hasValue:
			header(value)
		case name == "H" && i+1 < len(args):
			i++
			header(args[i])
		case valueFlags[name] && !hasValue && i+1 < len(args):
			public.WriteString(" " + a)
			i++
			public.WriteString(" " + args[i])
		default:
			public.WriteString(" " + a)
		}
	}
	for j := i; j < len(args); j++ {
		if j == i {
			secrets = append(secrets, fuzzSecrets(args[j])...)
			public.WriteString(fuzzURLPublic(args[j]))
			continue
		}
		public.WriteString(" " + args[j]) // not parsed: never printed anyway
	}
	return secrets, public.String()
}

// fuzzFixedText is text trace writes whatever the request: its usage, the
// waterfall's and JSON's labels, the outcome of a refused connection.
var fuzzFixedText = sync.OnceValue(func() string {
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"trace", "-h"}, &stdout, &stderr)
	return stdout.String() + stderr.String() +
		"REDACTED connect-refused dial tcp 127.0.0.1:1: connect: connection refused outcome connection events total get-conn connect-start connect-done done"
})

// The secrets TestSecretsCLI gives the CLI: a user and password in the URL,
// a token and a session value (written escaped) in its query and a query
// key written without a value; a bearer token, Basic proxy credentials, a
// cookie, two API keys and a secret token in headers whose names are typed
// in every letter case.
const (
	cliUser      = "Us3rNameValue"
	cliPassword  = "S3cr3tPassw0rd"
	cliToken     = "T0kenValue"
	cliSession   = "S3ss+ion/Value=="
	cliBareKey   = "B4reKeyS3cret"
	cliBearer    = "B3arerValue"
	cliProxyUser = "Pr0xyUserName"
	cliProxyPass = "Pr0xyPassw0rd"
	cliCookie    = "C00kieValue"
	cliAPIKey    = "Ap1KeyValue"
	cliAPIKeyUp  = "Ap1KeyUpperCase"
	cliSecretTok = "S3cretTokenValue"
	cliPath      = "/api/items"
)

var (
	cliProxyBasic = base64.StdEncoding.EncodeToString([]byte(cliProxyUser + ":" + cliProxyPass))
	cliSecrets    = []string{cliUser, cliPassword, cliToken, cliSession, url.QueryEscape(cliSession), cliBareKey, cliBearer,
		cliProxyUser, cliProxyPass, cliProxyBasic, cliCookie, cliAPIKey, cliAPIKeyUp, cliSecretTok,
		base64.StdEncoding.EncodeToString([]byte(cliUser + ":" + cliPassword))}
)

func cliSecretURL(hostport string) string {
	return "http://" + cliUser + ":" + cliPassword + "@" + hostport + cliPath + "?token=" + cliToken +
		"&session=" + url.QueryEscape(cliSession) + "&" + cliBareKey
}

// readHead reads a request's head from c and returns its lines, the
// request line first.
func readHead(c net.Conn) []string {
	br := bufio.NewReader(io.LimitReader(c, 64<<10))
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			return lines
		}
		lines = append(lines, strings.TrimRight(line, "\r\n"))
	}
}

// echoServers starts servers that quote the request they were sent back in
// their reply, by name: in the status line (the request line, or the whole
// head), in a malformed header line, in valid headers (one a Set-Cookie),
// in a valid Location and in one that does not parse.
func echoServers(t *testing.T) map[string]string {
	reply := func(answer func(head []string) string) string {
		return probeRawTCP(t, func(c net.Conn) {
			for {
				head := readHead(c)
				if len(head) == 0 {
					return
				}
				if _, err := io.WriteString(c, answer(head)); err != nil {
					return
				}
			}
		})
	}
	joined := func(head []string) string { return strings.Join(head, " | ") }
	return map[string]string{
		// "malformed HTTP status code" quotes the request URI.
		"status line: request line": reply(func(h []string) string { return h[0] + "\r\n\r\n" }),
		// ... and here every header sent, up to the first space.
		"status line: head": reply(func(h []string) string {
			return "HTTP/1.1 " + strings.ReplaceAll(strings.Join(h, "|"), " ", "_") + "\r\n\r\n"
		}),
		"malformed header": reply(func(h []string) string { return "HTTP/1.1 200 OK\r\nEcho " + joined(h) + "\r\n\r\n" }),
		"headers": reply(func(h []string) string {
			var b strings.Builder
			b.WriteString("HTTP/1.1 200 OK\r\n")
			for i, l := range h {
				fmt.Fprintf(&b, "X-Echo-%d: %s\r\n", i, l)
			}
			b.WriteString("Set-Cookie: echoed=" + url.QueryEscape(joined(h)) + "\r\nContent-Length: 2\r\n\r\nok")
			return b.String()
		}),
		"location": reply(func(h []string) string {
			return "HTTP/1.1 302 Found\r\nLocation: http://" + cliUser + ":" + cliPassword + "@127.0.0.1:1/next?echo=" +
				url.QueryEscape(joined(h)) + "\r\nContent-Length: 0\r\n\r\n"
		}),
		"malformed location": reply(func(h []string) string {
			return "HTTP/1.1 302 Found\r\nLocation: http://[::1" + strings.ReplaceAll(joined(h), " ", "") + "\r\nContent-Length: 0\r\n\r\n"
		}),
	}
}

// TestSecretsCLI runs trace (text and -json) and probe (-v, -v -json, -json
// -o) with a URL and headers full of secrets, the header names typed in
// every letter case, against a server that answers, servers that quote the
// request back in their status line, in their headers and in a Location,
// and a refused port; then with a malformed URL and a malformed -H flag.
// No secret appears on stdout, stderr or in the report file, and the host,
// path and query key do.
func TestSecretsCLI(t *testing.T) {
	hosts := echoServers(t)
	hosts["ok"] = newProbeServer(t, 0, false).Listener.Addr().String()
	hosts["refused"] = testserver.ClosedPort(t)
	headers := []string{"-H", "authorization: Bearer " + cliBearer, "-H", "PROXY-AUTHORIZATION: Basic " + cliProxyBasic,
		"-H", "cookie: id=" + cliCookie, "-H", "x-api-key: " + cliAPIKey, "-H", "X-API-KEY: " + cliAPIKeyUp,
		"-H", "x-SECRET-token: " + cliSecretTok}
	// Without Authorization, http.Client sends the URL's user as Basic.
	basicHeaders := headers[2:]
	report := filepath.Join(t.TempDir(), "report.json")

	// What each target shows, and how each command ends against it.
	type target struct {
		trace, probe int
		want         []string // in stdout+stderr (and the report file)
	}
	targets := map[string]target{
		"ok":                        {exitOK, exitOK, []string{cliPath, "token=REDACTED", "session=REDACTED"}},
		"status line: request line": {exitUnreachable, exitUnreachable, []string{"malformed HTTP status code", cliPath, "token=REDACTED"}},
		"status line: head":         {exitUnreachable, exitUnreachable, []string{"malformed HTTP status code", "X-Api-Key:_REDACTED", "X-Secret-Token:_REDACTED", "Proxy-Authorization:_"}},
		"malformed header":          {exitUnreachable, exitUnreachable, []string{"malformed MIME header line", "Cookie: REDACTED", "X-Api-Key: REDACTED", "X-Secret-Token: REDACTED"}},
		"headers":                   {exitOK, exitOK, []string{"200"}},
		"location":                  {exitOK, exitOK, []string{"302"}},
		"malformed location":        {exitFail, exitOK, []string{"302"}},
		"refused":                   {exitUnreachable, exitUnreachable, []string{"connect-refused"}},
	}
	type run struct {
		args       []string
		code       int
		want       []string
		reportFile bool
	}
	var runs []run
	for name, tg := range targets {
		host := hosts[name]
		want := append([]string{host}, tg.want...)
		for _, hs := range [][]string{headers, basicHeaders} {
			for _, format := range [][]string{nil, {"-json"}} {
				runs = append(runs, run{args: append(append(append([]string{"trace"}, format...), hs...), cliSecretURL(host)),
					code: tg.trace, want: want})
			}
			for _, format := range [][]string{{"-v"}, {"-v", "-json"}} {
				runs = append(runs, run{args: append(append(append([]string{"probe", "-n", "2", "-fail-on", "none"}, format...), hs...), cliSecretURL(host)),
					code: tg.probe, want: want})
			}
		}
		runs = append(runs, run{args: append(append([]string{"probe", "-n", "2", "-fail-on", "none", "-json", "-o", report}, headers...), cliSecretURL(host)),
			code: tg.probe, want: want, reportFile: true})
	}
	runs = append(runs,
		// Malformed: a port that is no number, a header with no colon.
		run{args: append(append([]string{"trace"}, headers...), cliSecretURL("127.0.0.1:bad")), code: exitUsage, want: []string{"malformed URL"}},
		run{args: append(append([]string{"probe"}, headers...), cliSecretURL("127.0.0.1:bad")), code: exitUsage, want: []string{"malformed URL"}},
		run{args: []string{"trace", "-H", "Authorization Bearer " + cliBearer, cliSecretURL(hosts["ok"])}, code: exitUsage,
			want: []string{`-H: header must be "Name: value"`}},
		run{args: []string{"probe", "-H", "Cookie=" + cliCookie, cliSecretURL(hosts["ok"])}, code: exitUsage,
			want: []string{`-H: header must be "Name: value"`}},
		run{args: []string{"trace", "-H", "Authorization: Bearer " + cliBearer + "\x01", cliSecretURL(hosts["ok"])}, code: exitUsage,
			want: []string{"-H: invalid value for header Authorization"}},
	)
	for _, r := range runs {
		if r.reportFile {
			require.NoError(t, os.WriteFile(report, nil, 0o600))
		}
		code, stdout, stderr := runCLIGuarded(t, r.args...)
		out := stdout + stderr
		if r.reportFile {
			b, err := os.ReadFile(report)
			require.NoError(t, err)
			require.NotEmpty(t, b, "%q", r.args)
			out += string(b)
		}
		require.Equal(t, r.code, code, "%q:\n%s", r.args, out)
		for _, s := range cliSecrets {
			require.NotContains(t, out, s, "%q shows a secret:\n%s", r.args, out)
		}
		for _, w := range r.want {
			require.Contains(t, out, w, "%q:\n%s", r.args, out)
		}
	}
}

// TestSecretsCLIEscapedAndShort: the cases that were printed before. A
// header value with a backslash, a quote, a tab, a byte that is not UTF-8
// or a C1 control, echoed in the status line (which net/http quotes), and
// the Basic credentials of a password holding '"' or '\', echoed decoded,
// are masked on stdout and stderr of trace and probe (text and JSON), and
// so is the URL's user name; a header value of 2 bytes is masked where it
// follows its name, as -h and the README say.
func TestSecretsCLIEscapedAndShort(t *testing.T) {
	status := probeRawTCP(t, func(c net.Conn) {
		head := readHead(c)
		if len(head) == 0 {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(strings.Join(head, "\r\n") + "\r\n\r\n")))
		if err != nil {
			return
		}
		v := req.Header.Get("X-Api-Key")
		if user, pass, ok := req.BasicAuth(); ok {
			v = user + ":" + pass
		}
		io.WriteString(c, "HTTP/1.1 "+v+"\r\n\r\n")
	})
	malformed := echoServers(t)["malformed header"]
	type run struct {
		args    []string
		secrets []string
		want    []string
	}
	var runs []run
	for _, key := range []string{`SEKRET\zz`, `SEKRET"zz`, "SEKRET\tzz", "SEKRET\xffzz", "SEKRET\u009bzz"} {
		runs = append(runs, run{args: []string{"-H", "X-Api-Key: " + key, "http://" + status + "/"},
			secrets: []string{key}, want: []string{"malformed HTTP status code"}})
	}
	for _, pw := range []string{"SEKRET%22pw", "SEKRET%5Cpw"} {
		runs = append(runs, run{args: []string{"http://tokuser:" + pw + "@" + status + "/"},
			secrets: []string{"tokuser", "SEKRET"}, want: []string{"malformed HTTP status code"}})
	}
	runs = append(runs, run{args: []string{"-H", "X-Pin: 42", "http://" + malformed + "/"},
		secrets: []string{"X-Pin: 42"}, want: []string{"X-Pin: REDACTED"}})
	for _, r := range runs {
		for _, cmd := range [][]string{{"trace"}, {"trace", "-json"}, {"probe", "-n", "2"}, {"probe", "-n", "2", "-json"}} {
			args := append(append([]string{}, cmd...), r.args...)
			code, stdout, stderr := runCLIGuarded(t, args...)
			require.Equal(t, exitUnreachable, code, "%q:\n%s%s", args, stdout, stderr)
			out := stdout + stderr
			for _, s := range r.secrets {
				for _, form := range []string{s, strconv.Quote(s), strconv.QuoteToASCII(s), redact.Printable(s)} {
					require.NotContains(t, out, strings.Trim(form, `"`), "%q shows %q:\n%s", args, s, out)
				}
			}
			for _, w := range r.want {
				require.Contains(t, out, w, "%q", args)
			}
		}
	}
	// What -h and the README say of short values.
	for _, cmd := range []string{"trace", "probe"} {
		_, help, _ := runCLI(t, cmd, "-h")
		require.Contains(t, help, "1 or 2 bytes only where it follows its", cmd)
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "(1–2 bytes after their name only)")
}
