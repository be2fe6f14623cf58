// Package redact masks the secrets of a request — URL user information and
// query values, Authorization, Proxy-Authorization, Cookie and the headers a
// caller names secret — in every text connaudit writes, and escapes what a
// terminal would obey.
package redact

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Masked replaces a secret value in every output.
const Masked = "REDACTED"

// URL returns u as a string without user information or fragment and
// with every query value replaced by [Masked]; query keys stay, but a key
// written without a value ("?TOKEN") may be the secret itself and is
// replaced whole.
func URL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		c.RawQuery = query(c.RawQuery)
	}
	return c.String()
}

// query returns the raw query q with every value masked and every key
// written without a value masked whole, keys sorted and each listed once;
// a query that does not parse is masked whole.
func query(q string) string {
	if strings.ContainsRune(q, ';') {
		return Masked // net/url refuses ';' as a separator
	}
	keys := map[string]bool{}
	bare := false
	for _, pair := range strings.Split(q, "&") {
		if pair == "" {
			continue
		}
		k, _, hasValue := strings.Cut(pair, "=")
		if _, err := url.QueryUnescape(pair); err != nil {
			return Masked
		}
		if !hasValue {
			bare = true
			continue
		}
		k, _ = url.QueryUnescape(k)
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for i, k := range sorted {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(Masked)
	}
	if bare {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(Masked)
	}
	return b.String()
}

// URLString parses s and redacts it with [URL]. A string that
// does not parse is replaced whole by [Masked].
func URLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return Masked
	}
	return URL(u)
}

// Sensitive reports whether the values of the header name are always
// masked: Authorization, Proxy-Authorization, Cookie and Set-Cookie.
func Sensitive(name string) bool {
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	return false
}

// Header returns the values of the header name joined as one, or [Masked]
// for a [Sensitive] header.
func Header(name string, values []string) string {
	if Sensitive(name) {
		return Masked
	}
	return strings.Join(values, ", ")
}

// Error returns err's text with every occurrence of the raw URL u
// replaced by the redacted form, for errors such as *url.Error that quote
// the URL they were given, and u's password and query values (of 3 bytes
// or more), as decoded and as written in u, and the Basic credentials
// http.Client builds from u's user information, masked wherever else they
// appear; a shorter query value is masked where it follows its key.
//
// Control characters are escaped as Go writes them in a string literal
// ("\x1b", "\r"), as are bytes that are not UTF-8: an error may quote what
// a hostile server sent (a certificate's names, say), which must neither
// drive the terminal that shows it nor forge a line of output.
func Error(err error, u *url.URL) string {
	return ErrorWith(err, u, nil)
}

// redact is [Error] with the secrets more masked too (an empty err
// text stays empty): control characters are escaped last, once every
// secret is masked. more may be sorted.
func ErrorWith(err error, u *url.URL, more []string) string {
	msg := redactError(err, u)
	if len(more) > 0 {
		msg = maskAll(msg, more)
	}
	return Printable(msg)
}

// redactError masks u's secrets in err's text.
func redactError(err error, u *url.URL) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if u == nil {
		return msg
	}
	redacted := URL(u)
	msg = strings.ReplaceAll(msg, u.String(), redacted)
	// The secrets are then masked wherever they appear, not only inside
	// u: an error may quote the request line ("malformed HTTP status code
	// \"/p?token=…\"") or a URL a redirect kept the query for. Each is
	// masked as decoded and as written in the URL (a base64 token is
	// written escaped): the password, whatever its length, and each query
	// value of 3 bytes or more, also when the query does not parse (a ';'
	// separator, a bad escape).
	var secrets []string
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			// http.Client's *url.Error quotes the URL with the password
			// starred ("user:***@host"), as net/http's stripPassword does.
			starred := strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
			msg = strings.ReplaceAll(msg, starred, redacted)
		}
		if p, ok := u.User.Password(); ok && p != "" {
			secrets = append(secrets, secretForms(p, passwordAsWritten(u.User))...)
		}
		// http.Client sends the user information as a Basic
		// Authorization, which a server may quote back.
		p, _ := u.User.Password()
		secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+p)))
	}
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		// A value is a secret; so is a key written without one.
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			v = k
		}
		d, err := url.QueryUnescape(v)
		if err != nil {
			d = v
		}
		for _, s := range secretForms(d, v) {
			if len(s) >= 3 {
				secrets = append(secrets, s)
			}
		}
	}
	msg = maskAll(msg, secrets)
	// A short value is masked only where it is written with its key, as
	// an error quoting the request line quotes it ("?pin=42"): masking
	// "42" everywhere would mask unrelated text.
	var pairs []string
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		if _, v, ok := strings.Cut(pair, "="); ok && v != "" && len(v) < 3 {
			pairs = append(pairs, pair)
		} else if !ok && pair != "" && len(pair) < 3 {
			// A short key without a value: masked where it follows
			// the query's '?' or a separator.
			for _, sep := range [...]string{"?", "&", ";"} {
				msg = strings.ReplaceAll(msg, sep+pair, sep+Masked)
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return len(pairs[i]) > len(pairs[j]) })
	for _, pair := range pairs {
		k, _, _ := strings.Cut(pair, "=")
		msg = strings.ReplaceAll(msg, pair, k+"="+Masked)
	}
	if u.User != nil {
		if n := u.User.Username(); n != "" {
			msg = strings.ReplaceAll(msg, n+":***@", "")
			msg = strings.ReplaceAll(msg, n+"@", "")
		}
	}
	return msg
}

// RequestError returns err's text redacted as [Error] does for
// req's URL, with the values of req's Authorization, Proxy-Authorization
// and Cookie headers, and of the headers named, masked too: a server may
// quote what it was sent in a malformed reply, which net/http's error then
// quotes.
func RequestError(err error, req *http.Request, names ...string) string {
	if err == nil || req == nil {
		return ErrorWith(err, nil, nil)
	}
	return ErrorWith(err, req.URL, RequestSecrets(req, names))
}

// Printable returns s with control characters (but tab) and bytes that
// are not UTF-8 escaped as Go writes them in a string literal, so that s
// can be shown on a terminal as it is: text from a server (an error that
// quotes it) can then neither move the cursor, set the window title nor
// start a line of its own.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029', r == '\ufeff':
			// C1 controls (a terminal may read U+009B as CSI) and
			// characters that break or hide lines.
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// RequestSecrets returns the secrets in req's header: each value of
// Authorization, Proxy-Authorization and Cookie and of the headers named
// (as canonical keys), and the parts of each that a server may quote
// alone: an authorization's credentials, and a Basic one decoded, its
// password apart; each cookie's value. Parts shorter than 3 bytes are
// left out, as for query values.
func RequestSecrets(req *http.Request, names []string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 {
			out = append(out, s)
		}
	}
	for _, name := range [...]string{"Authorization", "Proxy-Authorization"} {
		for _, v := range values(req.Header, name) {
			add(v)
			scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
			if !ok {
				continue
			}
			cred = strings.TrimSpace(cred)
			add(cred)
			if strings.EqualFold(scheme, "Basic") {
				if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
					add(string(b))
					if _, pass, ok := strings.Cut(string(b), ":"); ok {
						add(pass)
					}
				}
			}
		}
	}
	for _, v := range values(req.Header, "Cookie") {
		add(v)
		for _, pair := range strings.Split(v, ";") {
			if _, val, ok := strings.Cut(pair, "="); ok {
				add(strings.TrimSpace(val))
			}
		}
	}
	// The named headers, whatever the letter case of the names given and
	// of the keys in the header map (a key set directly, not through
	// Header.Set, may not be canonical).
	for key, values := range req.Header {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, key) }) {
			continue
		}
		for _, v := range values {
			add(v)
			add(strings.TrimSpace(v))
		}
	}
	return out
}

// values returns the values of every key of h equal to name but for
// letter case: a key set directly in the map, not through Header.Set, may
// not be canonical.
func values(h http.Header, name string) []string {
	var out []string
	for k, vs := range h {
		if strings.EqualFold(k, name) {
			out = append(out, vs...)
		}
	}
	return out
}

// passwordAsWritten returns the password of user as it is written in a URL
// (escaped).
func passwordAsWritten(user *url.Userinfo) string {
	_, p, _ := strings.Cut(user.String(), ":")
	return p
}

// secretForms returns the decoded form of a secret and, if it differs, the
// form written in the URL.
func secretForms(decoded, written string) []string {
	if written == decoded || written == "" {
		return []string{decoded}
	}
	return []string{decoded, written}
}

// maskAll replaces every occurrence of each secret in msg by [Masked],
// longest first, so that masking a secret never leaves behind part of a
// longer one that contains it, and the result does not depend on the order
// of secrets.
func maskAll(msg string, secrets []string) string {
	sort.Slice(secrets, func(i, j int) bool {
		if len(secrets[i]) != len(secrets[j]) {
			return len(secrets[i]) > len(secrets[j])
		}
		return secrets[i] < secrets[j]
	})
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, Masked)
	}
	return msg
}
