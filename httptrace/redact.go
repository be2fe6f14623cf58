package httptrace

import (
	"net/textproto"
	"net/url"
	"sort"
	"strings"
)

// Masked replaces a secret value in every output.
const Masked = "REDACTED"

// RedactURL returns u as a string without user information or fragment and
// with every query value replaced by [Masked]; query keys stay.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		if err != nil {
			c.RawQuery = Masked
		} else {
			keys := make([]string, 0, len(q))
			for k := range q {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var b strings.Builder
			for i, k := range keys {
				if i > 0 {
					b.WriteByte('&')
				}
				b.WriteString(url.QueryEscape(k))
				b.WriteByte('=')
				b.WriteString(Masked)
			}
			c.RawQuery = b.String()
		}
	}
	return c.String()
}

// RedactURLString parses s and redacts it with [RedactURL]. A string that
// does not parse is replaced whole by [Masked].
func RedactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return Masked
	}
	return RedactURL(u)
}

// SensitiveHeader reports whether the values of the header name are always
// masked: Authorization, Proxy-Authorization, Cookie and Set-Cookie.
func SensitiveHeader(name string) bool {
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	return false
}

func redactHeader(name string, values []string) string {
	if SensitiveHeader(name) {
		return Masked
	}
	return strings.Join(values, ", ")
}

// RedactError returns err's text with every occurrence of the raw URL u
// replaced by the redacted form, for errors such as *url.Error that quote
// the URL they were given, and u's password and query values (of 3 bytes
// or more), as decoded and as written in u, masked wherever else they
// appear.
func RedactError(err error, u *url.URL) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if u == nil {
		return msg
	}
	redacted := RedactURL(u)
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
	}
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		if _, v, ok := strings.Cut(pair, "="); ok {
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
	}
	msg = maskAll(msg, secrets)
	if u.User != nil {
		if n := u.User.Username(); n != "" {
			msg = strings.ReplaceAll(msg, n+":***@", "")
			msg = strings.ReplaceAll(msg, n+"@", "")
		}
	}
	return msg
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
