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
// (and its user password) replaced by the redacted form, for errors such as
// *url.Error that quote the URL they were given.
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
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			// http.Client's *url.Error quotes the URL with the password
			// starred ("user:***@host"), as net/http's stripPassword does.
			starred := strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
			msg = strings.ReplaceAll(msg, starred, redacted)
		}
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, Masked)
		}
		if n := u.User.Username(); n != "" {
			msg = strings.ReplaceAll(msg, n+":***@", "")
			msg = strings.ReplaceAll(msg, n+"@", "")
		}
	}
	if u.RawQuery != "" {
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			for _, vs := range q {
				for _, v := range vs {
					if len(v) >= 3 {
						msg = strings.ReplaceAll(msg, v, Masked)
					}
				}
			}
		}
	}
	return msg
}
