package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MinLen is the length, in bytes, from which a secret value is masked
// wherever it appears, in every form ([forms]). A value of 1 or 2 bytes
// is masked only where it is written after its name ([Secret.After]: a
// query key and '=', a header name and ':', a user name and ':'), since
// masking it everywhere would mask unrelated text: a pin "42" in
// "after 42 bytes".
const MinLen = 3

// A Secret is a value that must never reach an output, and the texts it is
// written after in a request (its name and separator: "pin=", "X-Api-Key:
// "), after which a value shorter than [MinLen] is still masked.
type Secret struct {
	Value string
	After []string
}

// rule replaces value, written after prefix, by to. prefix is matched
// whatever its letter case (a header name) and kept; value is matched
// exactly.
type rule struct {
	prefix, value, to string
}

// masker applies rules in one pass over a text, the longest match first at
// each position: a mask never replaces part of another mask, and the
// result does not depend on the order the rules were added in.
type masker struct {
	rules map[byte][]rule // by the folded first byte of prefix+value
}

func (m *masker) add(prefix, value, to string) {
	if value == "" {
		return
	}
	if m.rules == nil {
		m.rules = map[byte][]rule{}
	}
	k := lower(first(prefix, value))
	if slices.Contains(m.rules[k], rule{prefix, value, to}) {
		return
	}
	m.rules[k] = append(m.rules[k], rule{prefix, value, to})
}

// secret adds the rules that mask s: each of its forms wherever it
// appears, or, for a value shorter than MinLen, after each of s.After.
func (m *masker) secret(s Secret) {
	if s.Value == "" {
		return
	}
	if len(s.Value) >= MinLen {
		for _, f := range forms(s.Value) {
			m.add("", f, Masked)
		}
		return
	}
	for _, a := range s.After {
		if a == "" {
			continue
		}
		for _, f := range forms(s.Value) {
			m.add(a, f, Masked)
		}
	}
}

func first(prefix, value string) byte {
	if prefix != "" {
		return prefix[0]
	}
	return value[0]
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// apply returns s with every rule applied.
func (m *masker) apply(s string) string {
	if len(m.rules) == 0 || s == "" {
		return s
	}
	var b strings.Builder
	done := 0 // s[:done] is written to b
	for i := 0; i < len(s); {
		var best *rule
		for j := range m.rules[lower(s[i])] {
			r := &m.rules[lower(s[i])][j]
			n := len(r.prefix) + len(r.value)
			if n > len(s)-i || (best != nil && n <= len(best.prefix)+len(best.value)) {
				continue
			}
			if strings.EqualFold(s[i:i+len(r.prefix)], r.prefix) && s[i+len(r.prefix):i+n] == r.value {
				best = r
			}
		}
		if best == nil {
			i++
			continue
		}
		b.WriteString(s[done:i])
		b.WriteString(s[i : i+len(best.prefix)]) // as written
		b.WriteString(best.to)
		i += len(best.prefix) + len(best.value)
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// forms returns the forms in which a secret v may be written in a text an
// output shows: as it is; escaped as a JSON string is (by encoding/json,
// with and without its HTML escapes, as log/slog writes it, and with every
// character beyond ASCII escaped, as other languages' encoders do);
// percent-encoded (as a query value, as a path and every byte but the
// unreserved ones, with upper- and lower-case hex); escaped as a Go string
// literal is (strconv.Quote, which %q uses and net/http and x/net/http2
// quote what a server sent with, and QuoteToASCII, which %+q uses); and
// each of those Go-quoted once more, as net/http's error quotes a reply
// in which a server quoted or escaped what it was sent.
func forms(v string) []string {
	base := []string{v, quoteInner(strconv.Quote(v)), quoteInner(strconv.QuoteToASCII(v))}
	base = append(base, jsonForms(v)...)
	base = append(base, percentForms(v)...)
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, f := range base {
		add(f)
		add(quoteInner(strconv.Quote(f)))
		add(quoteInner(strconv.QuoteToASCII(f)))
	}
	return out
}

// quoteInner returns q, a quoted string, without its quotes.
func quoteInner(q string) string {
	return q[1 : len(q)-1]
}

// jsonForms returns v escaped as JSON string contents: encoding/json's
// forms with and without HTML escapes, log/slog's (which writes \b and \f
// as \u0008 and \u000c), and the forms of other encoders, with every
// control character as \uXXXX, and with every character beyond ASCII too
// (Python's json.dumps, say), with UTF-16 surrogate pairs beyond U+FFFF.
func jsonForms(v string) []string {
	html, _ := json.Marshal(v)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	plain := strings.TrimSuffix(b.String(), "\n")
	slogForm := strings.NewReplacer(`\b`, `\u0008`, `\f`, `\u000c`).Replace(plain)
	return []string{quoteInner(string(html)), quoteInner(plain), quoteInner(slogForm),
		jsonEscape(v, false, false), jsonEscape(v, true, false), jsonEscape(v, false, true), jsonEscape(v, true, true)}
}

// jsonEscape escapes v as JSON string contents: '"' and '\\', control
// characters as \n, \r and \t or, with longControls, all of them as
// \uXXXX, and with ascii every character beyond ASCII as \uXXXX.
func jsonEscape(v string, longControls, ascii bool) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		i += size
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n' && !longControls:
			b.WriteString(`\n`)
		case r == '\r' && !longControls:
			b.WriteString(`\r`)
		case r == '\t' && !longControls:
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			writeU(&b, r)
		case r >= 0x80 && ascii:
			if r > 0xffff {
				r -= 0x10000
				writeU(&b, 0xd800+(r>>10))
				writeU(&b, 0xdc00+(r&0x3ff))
				continue
			}
			writeU(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func writeU(b *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xf])
	}
}

// percentForms returns v percent-encoded as net/url escapes a query value
// (a space as '+') and a path segment, and with every byte but RFC 3986's
// unreserved ones escaped, each with upper- and lower-case hex digits.
func percentForms(v string) []string {
	var out []string
	for _, e := range []string{url.QueryEscape(v), url.PathEscape(v), percentAll(v)} {
		out = append(out, e, lowerHex(e))
	}
	return out
}

// percentAll escapes every byte of v but the unreserved ones.
func percentAll(v string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// lowerHex returns e, a percent-encoded text, with its hex digits in lower
// case.
func lowerHex(e string) string {
	b := []byte(e)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
			i += 2
		}
	}
	return string(b)
}
