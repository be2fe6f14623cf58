package httptrace_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

const (
	secretUser     = "alice-the-user"
	secretPassword = "s3cr3t-pw"
	secretToken    = "tok-SECRET-123"
	secretCookie   = "cookie-SECRET-456"
)

var secrets = []string{
	secretUser, secretPassword, secretToken, secretCookie,
	base64.StdEncoding.EncodeToString([]byte(secretUser + ":" + secretPassword)),
}

// secretURL puts a user, a password and a token into a URL on host.
func secretURL(host, path string) string {
	return "http://" + secretUser + ":" + secretPassword + "@" + host + path + "?token=" + secretToken + "&page=2"
}

// TestRedaction sends requests whose URL holds a user, a password and a
// token, and whose headers hold credentials, through every output: none of
// the secrets may appear in Timeline.URL, the JSON lines, the slog records,
// the waterfall or any recorded error, including an error whose text quotes
// the request line back.
func TestRedaction(t *testing.T) {
	ok := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	// A broken server that echoes the request line as its status line: the
	// Transport's error quotes it, token included.
	echo := rawServer(t, func(c net.Conn) {
		head, err := readRequestHead(c)
		if err != nil {
			return
		}
		line, _, _ := strings.Cut(head, "\r\n")
		io.WriteString(c, line+"\r\n\r\n")
		io.Copy(io.Discard, c) // until the client hangs up
	})
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := refused.Addr().String()
	refused.Close()

	var jsonBuf, slogBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&slogBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base := newBase(t, nil)
	tr, c := traced(t, base,
		[]httptrace.Observer{mustJSONLines(t, &jsonBuf), mustSlog(t, logger)},
		httptrace.Headers("Authorization", "Cookie", "X-Req"))
	client := &http.Client{Transport: tr}

	var clientErrs []string
	for _, u := range []string{
		secretURL(strings.TrimPrefix(ok.URL, "http://"), "/ok"),
		secretURL(echo.Addr().String(), "/echo"),
		secretURL(refusedAddr, "/refused"),
	} {
		req := newRequest(t, guardCtx(t), http.MethodGet, u, nil)
		req.Header.Set("Cookie", "session="+secretCookie)
		req.Header.Set("X-Req", "visible-value")
		resp, err := client.Do(req)
		if err != nil {
			pu, perr := url.Parse(u)
			require.NoError(t, perr)
			clientErrs = append(clientErrs, redact.Error(err, pu))
			// The client's own error quotes the URL (password starred, token clear).
			assert.Contains(t, err.Error(), secretToken)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	require.Len(t, clientErrs, 2)

	tls := waitTimelines(t, c, 3)
	require.Len(t, tls, 3)
	classes := map[httptrace.Class]bool{}
	for _, tl := range tls {
		classes[tl.Outcome.Class] = true
		assert.Equal(t, redact.Masked, tl.Header["Authorization"], "basic auth from the URL")
		assert.Equal(t, redact.Masked, tl.Header["Cookie"])
		assert.Equal(t, "visible-value", tl.Header["X-Req"])
		u, err := url.Parse(tl.URL())
		require.NoError(t, err)
		assert.Nil(t, u.User)
		assert.Equal(t, redact.Masked, u.Query().Get("token"))
		assert.Equal(t, redact.Masked, u.Query().Get("page"))

		var wf strings.Builder
		require.NoError(t, tl.WriteText(&wf, true))
		js, err := json.Marshal(tl)
		require.NoError(t, err)
		outputs := map[string]string{
			"URL":           tl.URL(),
			"Host":          tl.Host,
			"waterfall":     wf.String(),
			"MarshalJSON":   string(js),
			"outcome error": jsonOf(t, tl).Outcome.Error,
		}
		for name, out := range outputs {
			assert.Empty(t, secretsIn(out, secrets...), "%s of %s leaks: %s", name, tl.URL(), out)
		}
	}
	assert.Equal(t, map[httptrace.Class]bool{vocab.ClassOK: true, vocab.ClassProtocol: true, vocab.ClassConnectRefused: true}, classes)

	// The protocol error really quoted the token before redaction.
	for _, tl := range tls {
		if tl.Outcome.Class == vocab.ClassProtocol {
			require.Error(t, tl.Outcome.Err)
			assert.Contains(t, tl.Outcome.Err.Error(), secretToken, "the raw error quotes the token")
			assert.Contains(t, jsonOf(t, tl).Outcome.Error, "token="+redact.Masked)
		}
	}

	assert.Equal(t, 3, strings.Count(jsonBuf.String(), "\n"))
	assert.Equal(t, 3, strings.Count(slogBuf.String(), "\n"))
	for name, out := range map[string]string{"json lines": jsonBuf.String(), "slog": slogBuf.String(), "client errors": strings.Join(clientErrs, "\n")} {
		assert.Empty(t, secretsIn(out, secrets...), "%s leaks:\n%s", name, out)
	}
	assert.Contains(t, slogBuf.String(), "token="+redact.Masked)
	assert.Contains(t, jsonBuf.String(), `"Authorization":"REDACTED"`)
}

// TestRedactErrorClientForm: the *url.Error of http.Client quotes the URL
// with the password starred; RedactError removes the user and the token too.
func TestRedactErrorClientForm(t *testing.T) {
	raw := secretURL("127.0.0.1:1", "/p")
	u, err := url.Parse(raw)
	require.NoError(t, err)
	for _, e := range []error{
		&url.Error{Op: "Get", URL: raw, Err: io.EOF},
		&url.Error{Op: "Get", URL: strings.Replace(raw, secretPassword, "***", 1), Err: io.EOF}, // http.Client's form
	} {
		got := redact.Error(e, u)
		assert.Empty(t, secretsIn(got, secrets...), got)
		assert.Equal(t, `Get "http://127.0.0.1:1/p?page=REDACTED&token=REDACTED": EOF`, got)
	}
	assert.Equal(t, "http://127.0.0.1:1/p?page=REDACTED&token=REDACTED", redact.URL(u))
	assert.Equal(t, redact.Masked, redact.URLString("http://[::1"))
	assert.True(t, redact.Sensitive("set-cookie"))
	assert.False(t, redact.Sensitive("X-Req"))
}

// TestRedactionOfEchoedHeaders: a broken server that quotes the request's
// head back as a malformed header line makes net/http's error quote the
// request's credentials. They are masked in every output of the timeline
// and by RedactRequestError: the Basic credentials the client built from
// the URL (encoded and decoded), a bearer token, a cookie's value and the
// value of a header declared secret.
func TestRedactionOfEchoedHeaders(t *testing.T) {
	const (
		bearer = "bearer-SECRET-789"
		apiKey = "apikey-SECRET-012"
	)
	echo := rawServer(t, func(c net.Conn) {
		head, err := readRequestHead(c)
		if err != nil {
			return
		}
		lines := strings.Split(strings.TrimSpace(head), "\r\n")
		io.WriteString(c, "HTTP/1.1 200 OK\r\nEcho "+strings.Join(lines, " | ")+"\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	var jsonBuf, slogBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&slogBuf, nil))
	tr, c := traced(t, newBase(t, nil),
		[]httptrace.Observer{mustJSONLines(t, &jsonBuf), mustSlog(t, logger)},
		httptrace.SecretHeaders("x-api-key"), httptrace.Headers("X-Api-Key"))
	client := &http.Client{Transport: tr}
	all := append([]string{bearer, apiKey}, secrets...)

	send := func(u string, header http.Header) {
		t.Helper()
		req := newRequest(t, guardCtx(t), http.MethodGet, u, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		_, err := client.Do(req)
		require.Error(t, err)
		raw := err.Error()
		require.NotEmpty(t, secretsIn(raw, all...), "the raw error quotes the request: %s", raw)
		msg := redact.RequestError(err, req, "X-Api-Key")
		assert.Empty(t, secretsIn(msg, all...), "RedactRequestError leaks: %s", msg)
	}
	send(secretURL(echo.Addr().String(), "/basic"), http.Header{
		"Cookie": {"session=" + secretCookie + "; lang=en"}, "X-Api-Key": {apiKey},
	})
	send("http://"+echo.Addr().String()+"/bearer", http.Header{
		"Authorization": {"Bearer " + bearer}, "Proxy-Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(secretUser+":"+secretPassword))},
	})

	tls := waitTimelines(t, c, 2)
	for _, tl := range tls {
		require.Equal(t, vocab.ClassProtocol, tl.Outcome.Class)
		require.NotEmpty(t, secretsIn(tl.Outcome.Err.Error(), all...), "the raw outcome quotes the request")
		var wf strings.Builder
		require.NoError(t, tl.WriteText(&wf, true))
		js, err := json.Marshal(tl)
		require.NoError(t, err)
		for name, out := range map[string]string{"waterfall": wf.String(), "MarshalJSON": string(js)} {
			assert.Empty(t, secretsIn(out, all...), "%s of %s leaks: %s", name, tl.URL(), out)
		}
		if v, ok := tl.Header["X-Api-Key"]; ok {
			assert.Equal(t, redact.Masked, v, "a secret header is recorded masked")
		}
	}
	for name, out := range map[string]string{"json lines": jsonBuf.String(), "slog": slogBuf.String()} {
		assert.Empty(t, secretsIn(out, all...), "%s leaks:\n%s", name, out)
	}
}

// TestRedactErrorShortQueryValues: a query value shorter than 3 bytes is
// masked where the error quotes it with its key (a request line), and
// left alone elsewhere.
func TestRedactErrorShortQueryValues(t *testing.T) {
	u, err := url.Parse("http://127.0.0.1:1/p?pin=42&k=ab&page=2")
	require.NoError(t, err)
	got := redact.Error(errors.New(`malformed HTTP response "GET /p?pin=42&k=ab&page=2 HTTP/1.1" after 42 bytes`), u)
	assert.Equal(t, `malformed HTTP response "GET /p?pin=REDACTED&k=REDACTED&page=REDACTED HTTP/1.1" after 42 bytes`, got)
}

// TestPrintable: control characters, C1 controls and bytes that are not
// UTF-8 are escaped; printable text, tabs and other scripts are kept.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, tab\there: ünïcødé ✓":            "plain text, tab\there: ünïcødé ✓",
		"\x1b[2J\x1b[H\x1b]0;pwned\x07\r  PASS  fake": `\x1b[2J\x1b[H\x1b]0;pwned\x07\r  PASS  fake`,
		"line\nforged":                      `line\nforged`,
		"csi \u009b31m and \u2028 and \x7f": `csi \u009b31m and \u2028 and \x7f`,
		"bad \xff\xfe utf-8":                `bad \xff\xfe utf-8`,
		"":                                  "",
	} {
		assert.Equal(t, want, redact.Printable(in), "%q", in)
	}
	// RedactError escapes after masking: a secret is masked whole, and
	// what a server sent cannot drive a terminal.
	u, err := url.Parse("http://127.0.0.1:1/p?token=T0kenValue")
	require.NoError(t, err)
	got := redact.Error(errors.New("x509: certificate is valid for \x1b[2J\rPASS, not T0kenValue"), u)
	assert.Equal(t, `x509: certificate is valid for \x1b[2J\rPASS, not REDACTED`, got)
}

// TestRedactionOfQuotedEchoes: a server that answers with what it was sent
// as its status code makes net/http quote it (%q): the Basic credentials
// decoded, with a '"' or a '\' in the password, and header values with a
// backslash, a quote, a tab, a byte that is not UTF-8 or a C1 control all
// come back escaped, and are masked so, in every output of the timeline;
// the URL's user name too.
func TestRedactionOfQuotedEchoes(t *testing.T) {
	var which atomic.Int64 // 0: the Basic credentials, 1: X-Api-Key
	echo := rawServer(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		v := req.Header.Get("X-Api-Key")
		if which.Load() == 0 {
			user, pass, _ := req.BasicAuth()
			v = user + ":" + pass
		}
		io.WriteString(c, "HTTP/1.1 "+v+"\r\n\r\n")
	})
	var jsonBuf, slogBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&slogBuf, nil))
	tr, c := traced(t, newBase(t, nil), []httptrace.Observer{mustJSONLines(t, &jsonBuf), mustSlog(t, logger)},
		httptrace.SecretHeaders("x-api-key"))
	client := &http.Client{Transport: tr}
	type sent struct {
		url, key string
		secrets  []string // what must not show, raw
	}
	host := echo.Addr().String()
	var cases []sent
	for _, pw := range []string{`SEKRET"pw`, `SEKRET\pw`} {
		cases = append(cases, sent{url: "http://tokuser:" + url.QueryEscape(pw) + "@" + host + "/", secrets: []string{pw, "tokuser"}})
	}
	for _, key := range []string{`SEKRET\zz`, `SE"KRET`, "SE\tKRET", "SE\xffKRET", "SE\u009bKRET"} {
		cases = append(cases, sent{url: "http://" + host + "/", key: key, secrets: []string{key}})
	}
	for i, s := range cases {
		if s.key != "" {
			which.Store(1)
		}
		req := newRequest(t, guardCtx(t), http.MethodGet, s.url, nil)
		if s.key != "" {
			req.Header.Set("X-Api-Key", s.key)
		}
		_, err := client.Do(req)
		require.Error(t, err)
		quoted := fmt.Sprintf("%q", s.secrets[0])
		require.Contains(t, err.Error(), quoted[1:len(quoted)-1], "net/http quotes the secret it was sent back")
		tls := waitTimelines(t, c, i+1)
		tl := tls[i]
		var wf strings.Builder
		require.NoError(t, tl.WriteText(&wf, true))
		js, err := json.Marshal(tl)
		require.NoError(t, err)
		for name, out := range map[string]string{"waterfall": wf.String(), "MarshalJSON": string(js), "RedactError": tl.RedactError(tl.Outcome.Err)} {
			require.Contains(t, out, "malformed HTTP status code", name)
			for _, sec := range s.secrets {
				for _, form := range []string{sec, quoted[1 : len(quoted)-1], fmt.Sprintf("%+q", sec), redact.Printable(sec)} {
					if len(form) >= redact.MinLen {
						require.NotContains(t, out, strings.Trim(form, `"`), "%s of %q: %s", name, s.url, out)
					}
				}
			}
		}
	}
	for name, out := range map[string]string{"json lines": jsonBuf.String(), "slog": slogBuf.String()} {
		for _, s := range cases {
			for _, sec := range s.secrets {
				q := fmt.Sprintf("%q", sec)
				require.NotContains(t, out, q[1:len(q)-1], "%s: %s", name, out)
			}
		}
	}
}
