package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestURLQuery: values are masked, keys kept; a key written without a value
// is masked whole, not shown as "key=REDACTED".
func TestURLQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"http://h/p?token=abc":          "http://h/p?token=REDACTED",
		"http://h/p?TOKEN":              "http://h/p?REDACTED",
		"http://h/p?a=1&TOKEN&b=2":      "http://h/p?a=REDACTED&b=REDACTED&REDACTED",
		"http://h/p?a=1&a=2":            "http://h/p?a=REDACTED",
		"http://h/p?a=%zz":              "http://h/p?REDACTED",
		"http://h/p?a=1;b=2":            "http://h/p?REDACTED",
		"http://u:pw@h/p?x#frag":        "http://h/p?REDACTED",
		"http://h/p?k%20ey=v&sec%2Fret": "http://h/p?k+ey=REDACTED&REDACTED",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		got := URL(u)
		assert.Equal(t, want, got, raw)
		assert.NotContains(t, got, "TOKEN")
		assert.NotContains(t, got, "sec")
	}
}

// TestErrorValuelessKey: a key without a value is masked in error texts
// that quote the URL or the request line.
func TestErrorValuelessKey(t *testing.T) {
	u, err := url.Parse("http://h/p?SESSIONKEY&q=1&ab")
	require.NoError(t, err)
	msg := Error(errors.New(`malformed HTTP status code "/p?SESSIONKEY&q=1&ab" from http://h/p?SESSIONKEY&q=1&ab`), u)
	assert.NotContains(t, msg, "SESSIONKEY")
	assert.NotContains(t, msg, "&ab")
	assert.NotContains(t, msg, "q=1")
}

// TestRequestSecretsAnyCase: the values of secret headers are masked
// whatever the case of the names given and of the header map's keys.
func TestRequestSecretsAnyCase(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://h/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", "key-SECRET-1")
	req.Header["x-other-token"] = []string{"tok-SECRET-2"} // not canonical
	req.Header["authorization"] = []string{"Bearer bear-SECRET-3"}
	req.Header["cookie"] = []string{"sid=cookie-SECRET-4"}
	quoted := errors.New("server said: key-SECRET-1 tok-SECRET-2 bear-SECRET-3 cookie-SECRET-4")
	msg := RequestError(quoted, req, "x-api-key", "X-OTHER-TOKEN")
	assert.NotContains(t, msg, "SECRET", msg)
	assert.Equal(t, 4, strings.Count(msg, Masked), msg)
}

// TestSecretHeader: a header a server sent is masked whole when its name
// is a credential's or a secret's, in any case; others stay readable.
func TestSecretHeader(t *testing.T) {
	for _, name := range []string{"Set-Cookie", "authorization", "X-Auth-Token", "x-api-key", "Client-Secret",
		"X-Session-Id", "X-Amz-Security-Token", "Proxy-Authorization", "X-CSRF-Token", "Key"} {
		assert.True(t, SecretHeader(name), name)
	}
	for _, name := range []string{"Content-Type", "Location", "Date", "Server", "Keep-Alive", "Cache-Control",
		"X-Request-Id", "Link"} {
		assert.False(t, SecretHeader(name), name)
	}
}

// TestPrintable: control characters and bytes that are not UTF-8 are
// escaped; tabs and other text stay.
func TestPrintable(t *testing.T) {
	assert.Equal(t, "plain\ttext é", Printable("plain\ttext é"))
	assert.Equal(t, `a\x1b[2Jb\nc\r\xff\u009b`, Printable("a\x1b[2Jb\nc\r\xff\u009b"))
}

// encodings are the ways a secret may be written in a text that reaches an
// output, as the test writes them itself: as it is, Go-quoted (%q, %+q,
// as net/http and x/net/http2 quote a server's reply), JSON-escaped
// (encoding/json), percent-encoded (a query value, a path), and Go-quoted
// once more (net/http quoting a reply in which the server quoted or
// escaped the secret).
var encodings = map[string]func(string) string{
	"raw":         func(s string) string { return s },
	"%q":          func(s string) string { return fmt.Sprintf("%q", s) },
	"%+q":         func(s string) string { return fmt.Sprintf("%+q", s) },
	"json":        func(s string) string { b, _ := json.Marshal(s); return string(b) },
	"query":       url.QueryEscape,
	"path":        url.PathEscape,
	"%q of json":  func(s string) string { b, _ := json.Marshal(s); return fmt.Sprintf("%q", b) },
	"%q of %q":    func(s string) string { return fmt.Sprintf("%q", fmt.Sprintf("%q", s)) },
	"%q of query": func(s string) string { return fmt.Sprintf("%q", url.QueryEscape(s)) },
}

// TestMaskEveryForm: a secret of 3 bytes or more is masked in every form
// it may take, whatever bytes it holds (quotes, backslashes, a tab, a byte
// that is not UTF-8, a C1 control, HTML's specials, characters beyond
// ASCII and the BMP), and the text around it stays.
func TestMaskEveryForm(t *testing.T) {
	for _, secret := range []string{
		`SEKRET\zz`, `SE"KRET`, "SE\tKRET", "SE\xffKRET", "SE\u009bKRET", "a<b>&c", "é✓\U0001F600x", "to ken+/=", "abc",
	} {
		more := []Secret{{Value: secret}}
		for name, enc := range encodings {
			msg := "malformed HTTP status code " + enc(secret) + " from the server"
			got := Mask(msg, nil, more)
			assert.NotContains(t, got, enc(secret), "%s of %q: %s", name, secret, got)
			assert.Contains(t, got, "malformed HTTP status code ", "%s of %q", name, secret)
			assert.Contains(t, got, " from the server", "%s of %q", name, secret)
			assert.Contains(t, got, Masked, "%s of %q", name, secret)
			// And through ErrorWith, whose escaping comes after.
			assert.NotContains(t, ErrorWith(errors.New(msg), nil, more), Printable(enc(secret)), "%s of %q", name, secret)
		}
	}
}

// TestMaskIssueCases: the texts net/http wrote of replies that echoed a
// secret, which were printed before.
func TestMaskIssueCases(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, `http://u:SEKRET%22pw@127.0.0.1:1/`, nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", `SEKRET\zz`)
	for _, msg := range []string{
		`malformed HTTP status code "SEKRET\\zz"`,
		`malformed HTTP status code "u:SEKRET\"pw"`,
		`net/http: HTTP/1.x transport connection broken: malformed MIME header line: X-Api-Key: SEKRET\zz`,
	} {
		got := RequestError(errors.New(msg), req, "x-api-key")
		assert.NotContains(t, got, "SEKRET", "%s: %s", msg, got)
	}
	// The URL's user name is a secret too.
	u, err := url.Parse("http://tokuser:SEKRET@127.0.0.1:1/")
	require.NoError(t, err)
	got := Error(errors.New(`malformed HTTP status code "tokuser:SEKRET"; user tokuser`), u)
	assert.NotContains(t, got, "tokuser", got)
	assert.NotContains(t, got, "SEKRET", got)
}

// TestMaskShortValues: a value of 1 or 2 bytes is masked where it follows
// its name (a query key, a header name in any case, a user name), not
// elsewhere, where masking it would mask unrelated text.
func TestMaskShortValues(t *testing.T) {
	u, err := url.Parse("http://ab:pw@127.0.0.1:1/p?pin=42&x")
	require.NoError(t, err)
	more := []Secret{{Value: "k1", After: []string{"X-Api-Key: ", "X-Api-Key:"}}}
	for in, want := range map[string]string{
		`"GET /p?pin=42&x HTTP/1.1" after 42 bytes`:      `"GET /p?pin=REDACTED&REDACTED HTTP/1.1" after 42 bytes`,
		"malformed MIME header line: x-api-key: k1 (k1)": "malformed MIME header line: x-api-key: REDACTED (k1)",
		"X-API-KEY:k1":                             "X-API-KEY:REDACTED",
		"Basic credentials ab:pw, the pw and ab":   "Basic credentials REDACTED, the pw and ab",
		"http://ab:pw@127.0.0.1:1/x and //ab@host": "http://127.0.0.1:1/x and //host",
	} {
		assert.Equal(t, want, Mask(in, u, more), in)
	}
}

// TestMaskOnePass: masks are never masked again, and a secret inside a
// longer one does not leave the longer one's rest behind, whatever order
// the secrets come in.
func TestMaskOnePass(t *testing.T) {
	for _, more := range [][]Secret{
		{{Value: "RED"}, {Value: "ACT"}, {Value: "xREDy"}},
		{{Value: "xREDy"}, {Value: "ACT"}, {Value: "RED"}},
	} {
		assert.Equal(t, "a REDACTED b REDACTED c REDACTED", Mask("a RED b xREDy c ACT", nil, more))
	}
}
