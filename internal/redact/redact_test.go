package redact

import (
	"errors"
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

// TestPrintable: control characters and bytes that are not UTF-8 are
// escaped; tabs and other text stay.
func TestPrintable(t *testing.T) {
	assert.Equal(t, "plain\ttext é", Printable("plain\ttext é"))
	assert.Equal(t, `a\x1b[2Jb\nc\r\xff\u009b`, Printable("a\x1b[2Jb\nc\r\xff\u009b"))
}
