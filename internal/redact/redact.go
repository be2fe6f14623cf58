// Package redact masks the secrets of a request — URL user information
// (the user name too) and query values, Authorization,
// Proxy-Authorization, Cookie, Set-Cookie and the headers a caller names
// secret, in any letter case — in every text connaudit writes, in every
// form a server or an encoder may have given them ([Mask]); masks the
// secrets a text from outside carries, their values unknown, by the forms
// they are written in ([Text]); and escapes what a terminal would obey or
// not show ([Printable]).
package redact

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strconv"
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

// SecretHeader reports whether the values of a header a server sent, its
// secrets not known, are masked whole: a [Sensitive] header, or one whose
// name is a secret's as [Text] reads names (X-Auth-Token, X-Api-Key,
// Client-Secret, X-Session-Id), whatever its letter case.
func SecretHeader(name string) bool { return Sensitive(name) || secretName(name) }

// Header returns the values of the header name joined as one, or [Masked]
// for a [Sensitive] header.
func Header(name string, values []string) string {
	if Sensitive(name) {
		return Masked
	}
	return strings.Join(values, ", ")
}

// Error returns err's text redacted for a request to u ([ErrorWith] with
// no other secret).
func Error(err error, u *url.URL) string {
	return ErrorWith(err, u, nil)
}

// ErrorWith returns err's text (an empty text for a nil err) with every
// secret of a request to u and every secret in more masked, then with
// control characters escaped ([Printable]): an error may quote what a
// hostile server sent (a certificate's names, a reply that echoes the
// request), which must neither show a secret, nor drive the terminal that
// shows it, nor forge a line of output.
//
// The raw URL u, as written and Go-quoted (a *url.Error quotes it, with
// its password starred as http.Client writes it), is replaced by its
// redacted form ([URL]). Then each secret is masked in every form it may
// take ([Mask]): u's user name and password, the user information as
// written, the pair "user:password" and its base64 (the Basic credentials
// http.Client sends for u's user information), each query value and each
// key written without a value, as decoded and as written; and the secrets
// in more ([RequestSecrets]).
func ErrorWith(err error, u *url.URL, more []Secret) string {
	if err == nil {
		return ""
	}
	return Printable(Mask(err.Error(), u, more))
}

// Mask returns s with the secrets of a request to u and those in more
// masked, as [ErrorWith] masks them, with no escaping: for a text that
// came from a server other than as an error (a response header a report
// quotes).
//
// A secret of [MinLen] bytes or more is masked wherever it appears, in
// each of these forms: as it is; JSON-escaped (by encoding/json, with or
// without its HTML escapes, by log/slog, and ASCII-only); percent-encoded
// (as a query value, as a path, every byte but the unreserved ones; hex in
// either case); Go-quoted (strconv.Quote, as %q writes and as net/http and
// x/net/http2 quote a server's reply in their errors, and QuoteToASCII);
// and each of those Go-quoted once more. A shorter one is masked only
// where it follows its name (see [MinLen]).
func Mask(s string, u *url.URL, more []Secret) string {
	var m masker
	if u != nil {
		urlRules(&m, u)
	}
	for _, sec := range more {
		m.secret(sec)
	}
	return m.apply(s)
}

// urlRules adds the rules that mask the secrets of a request to u.
func urlRules(m *masker, u *url.URL) {
	redacted := URL(u)
	full := u.String()
	m.add("", full, redacted)
	m.add("", quoteInner(strconv.Quote(full)), redacted)
	if u.User != nil {
		name := u.User.Username()
		pass, hasPass := u.User.Password()
		written := u.User.String() // escaped, "name:password" or "name"
		writtenName, _, _ := strings.Cut(written, ":")
		if hasPass {
			// http.Client's *url.Error quotes the URL with the password
			// starred ("user:***@host"), as net/http's stripPassword does.
			starred := strings.Replace(full, written+"@", writtenName+":***@", 1)
			m.add("", starred, redacted)
			m.add("", quoteInner(strconv.Quote(starred)), redacted)
			m.add("//", writtenName+":***@", "")
		}
		// Elsewhere the user information is dropped where it is written
		// in a URL, and masked where it is quoted alone.
		m.add("//", written+"@", "")
		m.add("//", writtenName+"@", "")
		m.secret(Secret{Value: written})
		m.secret(Secret{Value: name, After: []string{"//"}})
		if hasPass {
			m.secret(Secret{Value: pass, After: []string{name + ":", writtenName + ":"}})
			m.secret(Secret{Value: passwordAsWritten(u.User), After: []string{name + ":", writtenName + ":"}})
		}
		// http.Client sends the user information as Basic credentials,
		// which a server may quote back, encoded or decoded.
		m.secret(Secret{Value: name + ":" + pass})
		m.secret(Secret{Value: base64.StdEncoding.EncodeToString([]byte(name + ":" + pass))})
	}
	// Each query value is a secret, and so is a key written without one;
	// also when the query does not parse (a ';' separator, a bad escape).
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			after := []string{"?", "&", ";"}
			m.secret(Secret{Value: k, After: after})
			m.secret(Secret{Value: unescape(k), After: after})
			continue
		}
		after := []string{k + "=", unescape(k) + "="}
		m.secret(Secret{Value: v, After: after})
		m.secret(Secret{Value: unescape(v), After: after})
	}
}

// unescape returns the query component s decoded, or s if it does not
// decode.
func unescape(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// RequestError returns err's text redacted as [ErrorWith] does for req's
// URL and the secrets of its header ([RequestSecrets]) with the headers
// named secret too: a server may quote what it was sent in a malformed
// reply, which net/http's error then quotes.
func RequestError(err error, req *http.Request, names ...string) string {
	if err == nil || req == nil {
		return ErrorWith(err, nil, nil)
	}
	return ErrorWith(err, req.URL, RequestSecrets(req, names))
}

// Printable returns s with control characters (but tab), bytes that are
// not UTF-8 and the characters a terminal does not show (Unicode's format
// characters: bidirectional overrides, isolates and marks, zero-width
// spaces and joiners, the byte order mark; and the blank Hangul fillers)
// escaped as Go writes them in a string literal (\x1b, \u202e), so that s
// can be shown on a terminal as it is: text from a server (an error that
// quotes it) or a client can then neither move the cursor, set the window
// title, start a line of its own, nor show its text in another order than
// it is written.
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
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029', invisible(r):
			// C1 controls (a terminal may read U+009B as CSI),
			// characters that break lines, and those a terminal does
			// not show that reorder or hide text (bidirectional
			// overrides and isolates, zero-width spaces, the byte
			// order mark).
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// RequestSecrets returns the secrets in req's header: each value of
// Authorization, Proxy-Authorization, Cookie and Set-Cookie and of the
// headers named (whatever the letter case of the names and of the
// header's keys), and the parts of each that a server may quote alone: an
// authorization's credentials, and Basic ones decoded, their user name and
// password apart; each cookie's value. Each is written after its header's
// name (or its scheme, or its cookie's name, or its user name), where a
// short one is masked too ([MinLen]).
func RequestSecrets(req *http.Request, names []string) []Secret {
	var out []Secret
	add := func(v string, after ...string) {
		if v != "" {
			out = append(out, Secret{Value: v, After: after})
		}
	}
	// The value of a header is written after its name, as a request's
	// head carries it and an error quoting a malformed header line shows
	// it (matched whatever the case of the name).
	header := func(key, v string) {
		canon := textproto.CanonicalMIMEHeaderKey(key)
		add(v, canon+": ", canon+":")
		add(strings.TrimSpace(v), canon+": ", canon+":")
	}
	for key, vs := range req.Header {
		canon := textproto.CanonicalMIMEHeaderKey(key)
		named := slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, key) })
		switch {
		case canon == "Authorization" || canon == "Proxy-Authorization":
			for _, v := range vs {
				header(key, v)
				scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
				if !ok {
					continue
				}
				cred = strings.TrimSpace(cred)
				add(cred, scheme+" ")
				if !strings.EqualFold(scheme, "Basic") {
					continue
				}
				if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
					add(string(b))
					user, pass, _ := strings.Cut(string(b), ":")
					add(user)
					add(pass, user+":")
				}
			}
		case canon == "Cookie" || canon == "Set-Cookie":
			for _, v := range vs {
				header(key, v)
				for _, pair := range strings.Split(v, ";") {
					if name, val, ok := strings.Cut(pair, "="); ok {
						add(strings.TrimSpace(val), strings.TrimSpace(name)+"=")
					}
				}
			}
		case named:
			for _, v := range vs {
				header(key, v)
			}
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
