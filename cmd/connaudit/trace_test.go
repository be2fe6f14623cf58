package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

// cliGuard bounds a run that might hang: generous, because it is only hit
// when something does.
const cliGuard = 20 * time.Second

// runCLIGuarded is runCLI for a run that might hang: the test fails if the
// run has not returned within cliGuard.
func runCLIGuarded(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(cliGuard):
		t.Fatalf("connaudit %q has not returned after %v", args, cliGuard)
		return 0, "", ""
	}
}

func TestTraceWaterfallAndJSON(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://alice:pa55word@", 1) + "/x?token=t0ken"

	code, out, errOut := runCLI(t, "trace", "-H", "Authorization: Bearer b3arer", "-H", "Cookie: c00kie=1", u)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "response    200 HTTP/1.1")
	require.Contains(t, out, "token=REDACTED")
	require.Equal(t, "Bearer b3arer", gotAuth, "the header was sent")

	code, js, errOut := runCLI(t, "trace", "-json", "-H", "Authorization: Bearer b3arer", u)
	require.Equal(t, exitOK, code, errOut)
	var tl map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &tl))
	require.Equal(t, "ok", tl["outcome"].(map[string]any)["class"])

	for _, s := range []string{out, js, errOut} {
		for _, secret := range []string{"pa55word", "t0ken", "b3arer", "c00kie", "alice"} {
			require.NotContains(t, s, secret)
		}
	}
}

func TestTraceUnreachableExitsThree(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there now
	code, out, errOut := runCLI(t, "trace", "http://"+addr+"/")
	require.Equal(t, exitUnreachable, code)
	require.Contains(t, out, "connect-refused")
	require.Contains(t, errOut, "connection refused")
}

func TestTraceUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"trace"},
		{"trace", "ht tp://x"},
		{"trace", "ftp://127.0.0.1/"},
		{"trace", "http:127.0.0.1:80"},
		{"trace", "http://:80/"},
		{"trace", "http://127.0.0.1:99999/"},
		{"trace", "-H", "no colon", "http://127.0.0.1/"},
		{"trace", "-X", "BAD METHOD", "http://127.0.0.1/"},
		{"trace", "-timeout", "-1s", "http://127.0.0.1/"},
		{"trace", "-http1", "-http2", "https://127.0.0.1/"},
		{"trace", "-http2", "http://127.0.0.1/"},
		{"trace", "-d", "@/no/such/file", "http://127.0.0.1/"},
		{"trace", "http://u:secretpw@127.0.0.1:99999/"},
		{"trace", "-deadline", "-1s", "http://127.0.0.1/"},
	} {
		code, _, errOut := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%q: %s", args, errOut)
		require.NotEmpty(t, errOut)
		require.NotContains(t, errOut, "secretpw")
		require.NotContains(t, errOut, "goroutine ")
	}
}

// TestTraceSwitchingProtocols traces a request that a server answers with
// a 101 and then silence: the switched connection, the response's body,
// is closed unread, where reading it would wait for ever (no timeout
// bounds it).
func TestTraceSwitchingProtocols(t *testing.T) {
	var closed testserver.Counter
	addr := probeRawTCP(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\nabc")
		io.Copy(io.Discard, c)
		closed.Add(1)
	})
	code, out, errOut := runCLIGuarded(t, "trace", "-timeout", "1s", "http://"+addr+"/")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "response    101 HTTP/1.1")
	ctx, cancel := context.WithTimeout(t.Context(), cliGuard)
	defer cancel()
	require.NoError(t, closed.WaitAtLeast(ctx, 1), "trace closed the switched connection")
}

// syncBuffer is a bytes.Buffer that the standard logger may write to from
// net/http's goroutines while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestTraceSilencesNetHTTPLog traces a request to a server that sends a
// second, unsolicited response after the first: net/http logs it to the
// standard logger (stderr), quoting its bytes, a cookie here. Nothing of it
// may come out. Not parallel: it sets the standard logger's output.
func TestTraceSilencesNetHTTPLog(t *testing.T) {
	prev := log.Writer()
	t.Cleanup(func() { log.SetOutput(prev) })
	var logged syncBuffer
	log.SetOutput(&logged)

	var closed testserver.Counter
	addr := probeRawTCP(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"+
			"HTTP/1.1 200 OK\r\nSet-Cookie: s=S3ss1onSecret\r\nContent-Length: 0\r\n\r\n")
		io.Copy(io.Discard, c)
		closed.Add(1)
	})
	code, out, errOut := runCLI(t, "trace", "http://"+addr+"/")
	require.Equal(t, exitOK, code, errOut)
	// net/http logs the unsolicited bytes, if it does, before it closes
	// the connection; and it does not once trace closed it.
	ctx, cancel := context.WithTimeout(t.Context(), cliGuard)
	defer cancel()
	require.NoError(t, closed.WaitAtLeast(ctx, 1))
	for _, s := range []string{out, errOut, logged.String()} {
		require.NotContains(t, s, "S3ss1onSecret")
		require.NotContains(t, s, "Unsolicited")
	}
}

func TestTraceDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var next atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			next.Add(1)
			io.WriteString(w, "ok")
			return
		}
		http.Redirect(w, r, "/next", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	code, out, errOut := runCLI(t, "trace", srv.URL+"/start?token=T0kenValue")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "response    302 HTTP/1.1")
	require.Zero(t, next.Load(), "the redirect was not followed")
	require.NotContains(t, out+errOut, "T0kenValue")
}

// TestTraceClientErrorExitsOne traces a redirect whose Location does not
// parse: the request's timeline is ok, but the Client returns an error,
// which trace prints (redacted) and exits 1 for.
func TestTraceClientErrorExitsOne(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "http://ruser:R3dirPw#@[::1")
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	code, out, errOut := runCLI(t, "trace", srv.URL+"/?token=T0kenValue")
	require.Equal(t, exitFail, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "outcome     ok")
	require.True(t, strings.HasPrefix(errOut, "connaudit trace: "), errOut)
	require.Contains(t, errOut, "Location")
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	require.NotContains(t, out+errOut, "T0kenValue")
	require.NotContains(t, out+errOut, "R3dirPw", "the Location is not quoted")
}

func TestTraceRequiresHTTP2(t *testing.T) {
	t.Parallel()
	h1 := newProbeServer(t, 0, true) // offers http/1.1 only
	code, out, errOut := runCLI(t, "trace", "-k", "-http2", h1.URL+"/")
	require.Equal(t, exitFail, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "alpn=http/1.1", "the trace is still shown")
	require.Contains(t, errOut, "connaudit trace: -http2: h2-not-offered: the server did not select HTTP/2 over TLS (ALPN: http/1.1)\n")

	h2 := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	code, out, errOut = runCLI(t, "trace", "-k", "-http2", h2.URL+"/")
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "HTTP/2.0")
}

// TestMalformedURLSecrets gives trace and probe URLs that net/url refuses
// because a password holds a '#', '/' or '?' (the authority ends there) or
// a bad escape, or that parse as no http URL: the error says what is wrong
// and quotes no part of the user information or the query.
func TestMalformedURLSecrets(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"http://admin:Pw1#S3cret@127.0.0.1:1/",
		"http://admin:Pw2/S3cret@127.0.0.1:1/",
		"http://admin:Pw3?S3cret@127.0.0.1:1/",
		"http://admin:Pw4%zzS3cret@127.0.0.1:1/",
		"http://admin:Pw5@[::1/?token=S3cret",
		"http:admin:Pw6S3cret@127.0.0.1:1/?token=S3cret",
	} {
		for _, cmd := range []string{"trace", "probe"} {
			code, out, errOut := runCLI(t, cmd, u)
			require.Equal(t, exitUsage, code, "%s %q: %s", cmd, u, errOut)
			require.True(t, strings.HasPrefix(errOut, "connaudit "+cmd+": malformed URL"), "%s %q: %s", cmd, u, errOut)
			for _, secret := range []string{"admin", "Pw", "S3cret", "zz"} {
				require.NotContains(t, out+errOut, secret, "%s %q", cmd, u)
			}
		}
	}
	// Without a scheme, "user:password@host" is an http URL, no scheme
	// "user" with an opaque rest: it is tried, and nothing of it shown.
	u := "admin:Pw7S3cret@" + testserver.ClosedPort(t) + "/?token=S3cret"
	for _, cmd := range []string{"trace", "probe"} {
		code, out, errOut := runCLI(t, cmd, u)
		require.Equal(t, exitUnreachable, code, "%s %q: %s", cmd, u, errOut)
		for _, secret := range []string{"admin", "Pw7", "S3cret"} {
			require.NotContains(t, out+errOut, secret, "%s %q", cmd, u)
		}
	}
}

// TestHostileCertificateNamesEscaped: a server's certificate may carry
// names with control characters, which Go's hostname check quotes in its
// error; trace and probe print them escaped, never raw, so the server can
// neither drive the terminal nor forge a line.
func TestHostileCertificateNamesEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b[2J\x1b[H\x1b]0;pwned\x07\r  PASS  fake-line"
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), DNSNames: []string{hostile},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	target := "https://localhost:" + port + "/"
	for _, args := range [][]string{{"trace", target}, {"trace", "-json", target}, {"probe", "-n", "2", target}, {"probe", "-n", "2", "-v", target}} {
		code, out, errOut := runCLI(t, args...)
		require.NotEqual(t, exitOK, code, "%q", args)
		all := out + errOut
		require.Contains(t, all, `\x1b[2J`, "%q: the names are shown, escaped:\n%s", args, all)
		for _, c := range []string{"\x1b", "\x07", "\r"} {
			require.NotContains(t, all, c, "%q shows a raw control character:\n%q", args, all)
		}
	}
}

// trace shows the response's header under the timeline, as httpstat does,
// a line per value fitted to 100 columns, with every secret masked:
// Set-Cookie and the headers named for a secret whole, the request's
// secrets a server echoes anywhere, the server's own where a value's form
// carries one, and what a terminal would obey escaped.
func TestTraceShowsTheResponseHeader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=cookie-SECRET")
		w.Header().Set("X-Auth-Token", "issued-SECRET")
		w.Header().Set("X-Client-Secret", "client-SECRET")
		w.Header().Set("Location", "http://user:pw-SECRET@example.com/next?sig=sig-SECRET")
		w.Header().Set("WWW-Authenticate", "Bearer bearer-SECRET")
		w.Header().Add("X-Echo", "token "+r.URL.Query().Get("token")+" key "+r.Header.Get("X-Api-Key"))
		w.Header().Set("X-Long", strings.Repeat("a", 300))
		w.Header().Set("X-Term", "a\u202eb")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	code, out, errOut := runCLIGuarded(t, "trace", "-H", "X-Api-Key: key-SECRET", srv.URL+"/?token=tok-SECRET")
	require.Equal(t, exitOK, code, errOut)
	_, head, ok := strings.Cut(out, "\n  response header\n")
	require.True(t, ok, out)
	require.Contains(t, head, "    Set-Cookie: REDACTED\n")
	require.Contains(t, head, "    X-Auth-Token: REDACTED\n")
	require.Contains(t, head, "    X-Client-Secret: REDACTED\n")
	require.Contains(t, head, "    Location: http://REDACTED@example.com/next?sig=REDACTED\n")
	require.Contains(t, head, "    Www-Authenticate: Bearer REDACTED\n")
	require.Contains(t, head, "    X-Echo: token REDACTED key REDACTED\n")
	require.Contains(t, head, "    Content-Length: 2\n")
	require.Contains(t, head, `    X-Term: a\u202eb`+"\n")
	for _, l := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		require.LessOrEqual(t, len([]rune(l)), 100, "%q", l)
		require.True(t, strings.HasPrefix(l, "    "), "%q", l)
	}
	require.NotContains(t, out, "SECRET")

	code, out, _ = runCLIGuarded(t, "trace", "-json", srv.URL)
	require.Equal(t, exitOK, code)
	require.NotContains(t, out, "response header", "the JSON is the timeline alone")
}
