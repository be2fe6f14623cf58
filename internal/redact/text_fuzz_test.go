package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// textMark surrounds the fuzzed bytes of a planted secret, so that every
// form of it is unlike any other text of the input.
const textMark = "sKy"

// A planting is a text that carries a secret and the forms the secret is
// written in there.
type planting struct {
	text  string
	forms []string
	// word: text starts with a name that is a secret's only as a whole
	// word (auth, sid), which a word glued before it would change.
	word bool
}

// plantings are the forms Text masks: each makes a text that carries the
// secret s (its fuzzed bytes made fit for the form), with names and
// keywords in the letter case bits gives.
var plantings = []func(s string, bits uint16) planting{
	// {"Authorization": "Bearer s"} as JSON.
	func(s string, bits uint16) planting {
		v := jsonInner(pick([]string{"Bearer ", ""}, bits>>4) + s)
		return planting{text: `{"` + flipCase(pick(headerNames, bits), bits) + `": "` + v + `"}`, forms: []string{s, jsonInner(s)}}
	},
	// {'Authorization': 'Bearer s'} as Python writes a dict.
	func(s string, bits uint16) planting {
		v := pyInner(pick([]string{"Bearer ", ""}, bits>>4) + s)
		return planting{text: `{'` + flipCase(pick(headerNames, bits), bits) + `': '` + v + `', 'timeout': 5}`, forms: []string{s, pyInner(s)}}
	},
	// A header line, X-Api-Key: s.
	func(s string, bits uint16) planting {
		s = fit(s, headerByte)
		return planting{text: flipCase(pick(headerNames, bits), bits) + pick([]string{": ", ":", " : "}, bits>>4) + s, forms: []string{s}}
	},
	// A bare Bearer s.
	func(s string, bits uint16) planting {
		s = fit(s, token68Byte)
		return planting{text: "token " + flipCase("Bearer", bits) + pick([]string{" ", "  ", "\t"}, bits>>4) + s, forms: []string{s}}
	},
	// password=s, token: s, api_key => "s", …
	func(s string, bits uint16) planting {
		name := flipCase(pick(pairNames, bits), bits)
		sep := pick([]string{"=", ": ", ":", " = ", " => ", "="}, bits>>4)
		word := len(name) <= 4
		switch bits >> 8 % 3 {
		case 0:
			s = fit(s, tokenByte)
			return planting{text: name + sep + s, forms: []string{s}, word: word}
		case 1:
			return planting{text: name + sep + `"` + jsonInner(s) + `"`, forms: []string{s, jsonInner(s)}, word: word}
		default:
			return planting{text: `"` + name + `"` + sep + `"` + jsonInner(s) + `"`, forms: []string{s, jsonInner(s)}, word: false}
		}
	},
	// scheme://user:s@host/ and scheme://s@host/, any scheme, and
	// scheme://user:s cut before its '@'.
	func(s string, bits uint16) planting {
		var ui *url.Userinfo
		if bits>>8&1 == 0 {
			ui = url.UserPassword("user", s)
		} else {
			ui = url.User(s)
		}
		written := strings.TrimPrefix(ui.String(), "user:")
		u := flipCase(pick(schemes, bits), bits) + "://" + ui.String() + "@127.0.0.1:8080/api/items?limit=5"
		if bits>>9&1 == 1 {
			ui = url.UserPassword("user", s)
			written = strings.TrimPrefix(ui.String(), "user:")
			u = flipCase(pick(schemes, bits), bits) + "://" + ui.String()
		}
		return planting{text: u, forms: []string{s, written}}
	},
	// A query value, a query key alone and a fragment.
	func(s string, bits uint16) planting {
		q := url.QueryEscape(s)
		u := flipCase(pick(schemes, bits), bits) + "://127.0.0.1/p" + pick([]string{"?k=" + q + "&n=1", "?a=1&" + q + "&n=1", "?a=1#" + q}, bits>>4)
		return planting{text: u, forms: []string{s, q}}
	},
	// A bare Basic credential.
	func(s string, bits uint16) planting {
		b := base64.StdEncoding.EncodeToString([]byte("user:" + s))
		return planting{text: "sent " + flipCase("Basic", bits) + " " + b, forms: []string{s, b}}
	},
	// A command line's option: --password s, -u user:s.
	func(s string, bits uint16) planting {
		s = fit(s, tokenByte)
		return planting{text: "curl " + pick([]string{"--password ", "-u user:", "--token=", "--oauth2-bearer "}, bits) + s + " -s", forms: []string{s}}
	},
}

// textEncodings are the ways a whole text may reach Text: as it is,
// escaped as JSON (with and without HTML's escapes, ASCII only), Go-quoted,
// percent-encoded (as a query, as a path, every byte, in lower-case hex),
// and twice.
var textEncodings = []func(string) string{
	func(s string) string { return s },
	func(s string) string { b, _ := json.Marshal(s); return quoteInner(string(b)) },
	func(s string) string { return jsonEscape(s, false, false) },
	func(s string) string { return jsonEscape(s, true, true) },
	func(s string) string { return quoteInner(strconv.Quote(s)) },
	func(s string) string { return quoteInner(strconv.QuoteToASCII(s)) },
	url.QueryEscape,
	url.PathEscape,
	percentAll,
	func(s string) string { return lowerHex(percentAll(s)) },
	func(s string) string { b, _ := json.Marshal(url.QueryEscape(s)); return quoteInner(string(b)) },
	func(s string) string {
		b, _ := json.Marshal(s)
		return quoteInner(strconv.Quote(quoteInner(string(b))))
	},
	func(s string) string { return url.QueryEscape(url.QueryEscape(s)) },
	func(s string) string { return url.QueryEscape(jsonEscape(s, false, false)) },
}

var (
	headerNames = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "api-key", "apikey", "x-auth-token",
		"X-Access-Token", "X-Client-Secret", "Cookie", "Set-Cookie", "Private-Token"}
	pairNames = []string{"password", "passwd", "pwd", "secret", "token", "api_key", "access_token", "client_secret",
		"PGPASSWORD", "refresh-token", "apiKey", "auth", "sid", "key", "pw", "X-Api-Key"}
	schemes = []string{"wss", "https", "http", "ws", "postgres", "redis", "mongodb+srv", "amqp", "ftp"}
	glues   = []string{"", " ", "\n", ", ", "\t", ": ", "; "}
)

// nameByte: what a name is written with.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-", c) >= 0
}

func pick(list []string, bits uint16) string { return list[int(bits)%len(list)] }

// flipCase returns s with the case of its i-th letter flipped where bit i
// (mod 16) of bits is set.
func flipCase(s string, bits uint16) string {
	b := []byte(s)
	for i, c := range b {
		if bits>>(i%16)&1 == 1 {
			switch {
			case 'a' <= c && c <= 'z':
				b[i] = c - 'a' + 'A'
			case 'A' <= c && c <= 'Z':
				b[i] = c - 'A' + 'a'
			}
		}
	}
	return string(b)
}

// fit returns s with every byte that ok refuses replaced by 'x'.
func fit(s string, ok func(byte) bool) string {
	b := []byte(s)
	for i, c := range b {
		if !ok(c) {
			b[i] = 'x'
		}
	}
	return string(b)
}

// headerByte: what an unquoted header value holds, but a backslash, which
// ends a line written escaped (\n).
func headerByte(c byte) bool { return ' ' <= c && c < 0x7f && c != '\\' }

// tokenByte: what an unquoted value that ends at a delimiter holds.
func tokenByte(c byte) bool { return c > ' ' && c < 0x7f && !endsValue(c) }

// token68Byte: what a Bearer credential holds (RFC 6750's b64token).
func token68Byte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
}

func jsonInner(s string) string { b, _ := json.Marshal(s); return quoteInner(string(b)) }

// pyInner returns s escaped as Python writes it in a string in single
// quotes.
func pyInner(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// FuzzText plants a secret of fuzzed bytes in one of the forms Text masks
// (see plantings), with its names in a fuzzed letter case, between fuzzed
// texts glued to it or not, encodes the whole as a client may have
// (textEncodings), and fails if any form of the secret survives Text, or
// if Text's output holds a control, bidirectional or invisible character
// or a byte that is not UTF-8.
func FuzzText(f *testing.F) {
	for i := range plantings {
		for e := range textEncodings {
			f.Add("request failed:", `SE"C\RET`, "retrying", uint8(i), uint8(e), uint16(i*7+e))
		}
	}
	f.Add("x", "a b", "\u202e", uint8(5), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, pre, raw, post string, form, enc uint8, bits uint16) {
		if len(raw) > 64 || len(pre) > 256 || len(post) > 256 {
			t.Skip()
		}
		p := plantings[int(form)%len(plantings)](textMark+raw+"yKs", bits)
		encode := textEncodings[int(enc)%len(textEncodings)]
		glue := pick(glues, bits>>10)
		if glue == "" && p.word && pre != "" && nameByte(pre[len(pre)-1]) {
			glue = " "
		}
		in := encode(pre + glue + p.text + pick(glues, bits>>13) + post)
		var look []string
		for _, s := range p.forms {
			for _, v := range []string{s, encode(s)} {
				look = append(look, v, Printable(v))
			}
		}
		for _, v := range look {
			if strings.Contains(pre, v) || strings.Contains(post, v) || strings.Contains(encode(pre), v) ||
				strings.Contains(encode(post), v) {
				t.Skip("the text around the secret holds it")
			}
		}
		out := Text(in)
		for _, v := range look {
			if strings.Contains(out, v) {
				t.Fatalf("secret %q shows as %q in\n%q\nfrom\n%q", p.forms[0], v, out, in)
			}
		}
		if !utf8.ValidString(out) {
			t.Fatalf("not UTF-8: %q", out)
		}
		for _, r := range out {
			if r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f || invisible(r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("%U shows in %q", r, out)
			}
		}
	})
}
