package redact

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTextForms: each form a client's text carried a secret in that passed
// unmasked before shows with its name and without its value.
func TestTextForms(t *testing.T) {
	for in, want := range map[string]string{
		`{"Authorization": "Bearer S3kr1t"}`:                       `{"Authorization": "REDACTED"}`,
		`{'Authorization': 'Bearer S3kr1t'}`:                       `{'Authorization': 'REDACTED'}`,
		`{"authorization":"Digest r=\"S3kr1t\""}`:                  `{"authorization":"REDACTED"}`,
		"X-Api-Key: S3kr1t":                                        "X-Api-Key: REDACTED",
		"api-key:S3kr1t\nnext line":                                "api-key:REDACTED\\nnext line",
		"APIKEY: S3kr1t":                                           "APIKEY: REDACTED",
		"X-AUTH-TOKEN: S3kr1t":                                     "X-AUTH-TOKEN: REDACTED",
		"token Bearer S3kr1t":                                      "token Bearer REDACTED",
		"sent bearer S3kr1t, got 401":                              "sent bearer REDACTED, got 401",
		"password=S3kr1t user=bob":                                 "password=REDACTED user=bob",
		"passwd: S3kr1t":                                           "passwd: REDACTED",
		"pwd=S3kr1t&x=1":                                           "pwd=REDACTED&x=1",
		"SECRET = S3kr1t;":                                         "SECRET = REDACTED;",
		"token=S3kr1t":                                             "token=REDACTED",
		"api_key=S3kr1t, access_token=S3kr1t":                      "api_key=REDACTED, access_token=REDACTED",
		`{"client_secret": "S3kr1t", "retries": 3}`:                `{"client_secret": "REDACTED", "retries": 3}`,
		"PGPASSWORD=S3kr1t psql":                                   "PGPASSWORD=REDACTED psql",
		"wss://user:S3kr1t@host/":                                  "wss://REDACTED@host/",
		"postgres://S3kr1t@db:5432/x":                              "postgres://REDACTED@db:5432/x",
		"https%3A%2F%2Fuser%3AS3kr1t%40host%2F%3Ftoken%3DS3kr1t":   "https%3A%2F%2FREDACTED%40host%2F%3Ftoken%3DREDACTED",
		"https%253A%252F%252Fuser%253AS3kr1t%2540host%252F":        "https%253A%252F%252FREDACTED%2540host%252F",
		"Basic dXNlcjpTM2tyMXQ=":                                   "Basic REDACTED",
		"xhttps://u:S3kr1t@h/?k=S3kr1t":                            "xhttps://REDACTED@h/?k=REDACTED",
		"GET http://h/p?S3kr1t&a=1#S3kr1t failed":                  "GET http://h/p?REDACTED&a=REDACTED#REDACTED failed",
		"cut short: wss://user:S3kr1t":                             "cut short: wss://REDACTED",
		"wss://user:S3kr1t:80/ ws://[S3kr1t:1]x:1/":                "wss://REDACTED/ ws://REDACTED/",
		"http://[::1]:8080/x http://h:80?token=S3kr1t wss://[::1]": "http://[::1]:8080/x http://h:80?token=REDACTED wss://[::1]",
		`"{\"Authorization\": \"Bearer S3kr1t\"}"`:                 `"{\"Authorization\": \"REDACTED\"}"`,
		`https:\/\/u:S3kr1t@h\/`:                                   `https:\/\/REDACTED@h\/`,
		"map[Authorization:[Bearer S3kr1t] Accept:[*/*]]":          "map[Authorization:[REDACTED] Accept:[*/*]]",
		"[('X-Api-Key', 'S3kr1t'), ('Accept', '*/*')]":             "[('X-Api-Key', 'REDACTED'), ('Accept', '*/*')]",
		"requests auth=('user', 'S3kr1t'), timeout=5":              "requests auth=(REDACTED), timeout=5",
		"curl -u user:S3kr1t --max-time 3 https://h/":              "curl -u REDACTED --max-time 3 https://h/",
		"curl --oauth2-bearer S3kr1t -s":                           "curl --oauth2-bearer REDACTED -s",
		"pass\u200bword=S3kr1t":                                    `pass\u200bword=REDACTED`,
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.S3kr1t-sig":      "jwt REDACTED",
	} {
		got := Text(in)
		assert.Equal(t, want, got, "%q", in)
		assert.NotContains(t, got, "S3kr1t", "%q", in)
	}
}

// TestTextProse: a text that names a secret without giving one stays as
// it is.
func TestTextProse(t *testing.T) {
	for _, s := range []string{
		"token bucket", "the password field was empty", "Basic auth failed; a bearer token is missing.",
		"requires a Bearer token.", "the secret is not set", "httpx.Timeout(connect=5, read=3, pool=1)",
		"requests.Session, HTTPAdapter(max_retries=urllib3 Retry(...)), timeout=(connect, read)",
		"curl's own --max-time, --connect-timeout, --speed-time, --retry from each policy",
		"GET http://127.0.0.1:8080/api/items: context deadline exceeded (Client.Timeout exceeded)",
		"author: Jane, authorized: true, monkey=1, passes: 3",
	} {
		assert.Equal(t, s, Text(s))
	}
}

// TestTextInvisible: characters that reorder or hide text are shown, as
// escapes, and so are controls.
func TestTextInvisible(t *testing.T) {
	in := "a\u202eb\u200ec\u2066d\u2069e\u200bf\ufeffg\u00adh\U000E0041i\u3164j\x1b[2Jk\r\u0085l"
	want := `a\u202eb\u200ec\u2066d\u2069e\u200bf\ufeffg\u00adh\U000e0041i\u3164j\x1b[2Jk\r\u0085l`
	assert.Equal(t, want, Text(in))
	assert.Equal(t, want, Printable(in))
	// Letters, accents, emoji and tabs stay.
	assert.Equal(t, "é ✓ 😀\tok", Text("é ✓ 😀\tok"))
}

// TestTextEncoded: a secret is masked where it is written, in whatever
// escapes a client's encoder gave it, and the text around it stays as it
// was written.
func TestTextEncoded(t *testing.T) {
	for in, want := range map[string]string{
		`{\"password\": \"S3\\\"kr1t\"}, more`:          `{\"password\": \"REDACTED\"}, more`,
		`password\u003dS3kr1t and`:                      `password\u003dREDACTED and`,
		`{\\\"token\\\": \\\"S3kr1t\\\"}`:               `{\\\"token\\\": \\\"REDACTED\\\"}`,
		"a%20password%3DS3kr1t%20b":                     "a%20password%3DREDACTED%20b",
		"X-Api-Key%3A+S3kr1t":                           "X-Api-Key%3A+REDACTED",
		`X-Api-Key: \u0053\u0033kr1t`:                   `X-Api-Key: REDACTED`,
		"http://h/?a=1\\u0026token=S3kr1t\\u0026b=2 ok": "http://h/?a=REDACTED\\u0026token=REDACTED\\u0026b=REDACTED ok",
	} {
		got := Text(in)
		assert.Equal(t, want, got, "%q", in)
		assert.False(t, strings.Contains(got, "S3") || strings.Contains(got, "kr1t"), "%q: %q", in, got)
	}
}

// FuzzScannerMemo: a scanner that remembers its last answers finds the
// same ends as one asked afresh, for values asked in order.
func FuzzScannerMemo(f *testing.F) {
	for _, s := range []string{
		`password="a\"b" token='c' x=(d(e)f) y=[g] z={h}` + "\nX-Api-Key: i\\nj",
		`"\\\"\\"` + "'`" + `((()))[[]` + "\r\n" + `a=b;c=d&e`, "://a://b/?c=d#e://f@g/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 512 {
			t.Skip()
		}
		memo := &scanner{t: s}
		for _, toLine := range []bool{false, true} {
			for i := range len(s) + 1 {
				fresh := &scanner{t: s}
				if got, want := memo.value(i, toLine), fresh.value(i, toLine); got != want {
					t.Fatalf("%q at %d (toLine %v): %v, afresh %v", s, i, toLine, got, want)
				}
			}
		}
		if got, want := urlSecrets(&scanner{t: s}), naiveURLSecrets(s); !coveredBy(want, got) {
			t.Fatalf("%q: URLs masked %v, each alone %v", s, got, want)
		}
	})
}

// naiveURLSecrets returns the spans of every URL in s, each read alone
// from its "://".
func naiveURLSecrets(s string) []span {
	var out []span
	for i := 0; ; {
		k := strings.Index(s[i:], "://")
		if k < 0 {
			return out
		}
		for _, sp := range urlSecrets(&scanner{t: s[i+k:]}) {
			if sp.lo < sp.hi {
				out = append(out, span{i + k + sp.lo, i + k + sp.hi})
			}
		}
		i += k + 3
	}
}

// coveredBy reports whether every byte of want is in some span of got.
func coveredBy(want, got []span) bool {
	for _, w := range want {
		for k := w.lo; k < w.hi; k++ {
			if !slices.ContainsFunc(got, func(g span) bool { return g.lo <= k && k < g.hi }) {
				return false
			}
		}
	}
	return true
}
