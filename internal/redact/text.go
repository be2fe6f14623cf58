package redact

import (
	"cmp"
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
)

// Text returns s, a text from outside connaudit whose secrets are not
// known (a client's error message, its configuration, a name it gave),
// with every value written in a form that carries a secret replaced by
// [Masked] and its name kept, then escaped as [Printable] escapes it: no
// control character, no bidirectional or invisible character, no byte
// that is not UTF-8 reaches the terminal.
//
// The forms masked, in any letter case:
//
//   - A URL of any scheme ("scheme://", found even when glued to the word
//     before it): its user information (up to the last '@' before the
//     first '/'; all of an authority whose port is not digits, as a
//     password cut before its '@' is), each query value and each query
//     key written without a value, and its fragment.
//   - A value after a name that holds a secret's word — password, passwd,
//     passphrase, pwd, secret, token, api key, access key, private key,
//     credential, authorization, cookie, session id, jwt, signature,
//     bearer, and the names auth, key, pw, sig, sid, however prefixed
//     or joined (X-Api-Key, PGPASSWORD, access_token, client-secret) —
//     written name=value, name: value, name => value, "name": "value",
//     'name': 'value', ("name", "value") or as a flag (--token value,
//     and curl's -u and --user). A value in quotes is masked to its
//     closing quote (one not escaped by a backslash); one in brackets
//     (Go's map[Authorization:[Bearer x]], Python's auth=("u", "p")) to
//     the closing bracket; an unquoted one to the end of its line after
//     an Authorization or Cookie header's name, or after an unquoted name
//     and ':' (a header line, a YAML line), and otherwise to the next
//     space or one of & ; , ) ] } < > " ' ` \.
//   - The credentials after "Bearer" or "Basic" anywhere, unless they
//     read as a word of prose (letters, lower case after the first, up
//     to 24: "bearer token", "Basic auth"); Basic's are masked whenever
//     they decode to "user:password".
//   - A JSON Web Token (eyJ….….…).
//
// Each form is looked for in s as written and in s decoded, up to three
// decodings deep: backslash escapes (JSON's, Go's, Python's), percent-
// encoding (a whole URL percent-encoded, a query escaped twice), and
// invisible characters removed; what is found in a decoding is masked
// where it is written in s.
//
// Text that names a secret without giving one stays readable: "token
// bucket", "the password field was empty", "Basic auth failed". The rest
// of a line after a secret's unquoted name and ':' is masked: "token:
// expired, retrying" shows as "token: REDACTED".
//
// Its work grows with the length of s, not with its square, whatever s
// holds.
func Text(s string) string {
	return Printable(maskText(s))
}

// A span is s[lo:hi].
type span struct{ lo, hi int }

// maskText returns s with every secret [Text] finds in it, in any view of
// it, replaced by [Masked].
func maskText(s string) string {
	if s == "" {
		return s
	}
	var spans []span
	for _, v := range views(s) {
		for _, sp := range secretsIn(v.text) {
			if sp.lo < sp.hi {
				spans = append(spans, span{v.lo[sp.lo], v.hi[sp.hi-1]})
			}
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var b strings.Builder
	done := 0 // s[:done] is written
	for i := 0; i < len(spans); {
		lo, hi := spans[i].lo, spans[i].hi
		for i++; i < len(spans) && spans[i].lo <= hi; i++ {
			hi = max(hi, spans[i].hi)
		}
		b.WriteString(s[done:lo])
		b.WriteString(Masked)
		done = hi
	}
	b.WriteString(s[done:])
	return b.String()
}

// secretsIn returns where the values in t that [Text] masks are.
func secretsIn(t string) []span {
	sc := &scanner{t: t}
	out := urlSecrets(sc)
	out = append(out, pairSecrets(sc)...)
	out = append(out, flagSecrets(sc)...)
	out = append(out, schemeSecrets(t)...)
	for _, m := range jwt.FindAllStringIndex(t, -1) {
		out = append(out, span{m[0], m[1]})
	}
	return out
}

// urlSecrets returns the user information, query values and keys written
// alone, and fragment of every URL in sc's text.
func urlSecrets(sc *scanner) []span {
	t := sc.t
	var out []span
	runEnd := -1 // where the run of the URL before ends
	for i := 0; ; {
		k := strings.Index(t[i:], "://")
		if k < 0 {
			return out
		}
		p := i + k + 3
		i = p
		// A URL within the run of the one before (in its path or its
		// query) has that one's query and fragment, masked already, or
		// none.
		inRun := p <= runEnd
		if !inRun {
			runEnd = sc.next(&sc.urlEnd, p, endsURL)
		}
		e := runEnd
		authEnd := e
		if slash := strings.IndexByte(t[p:e], '/'); slash >= 0 {
			authEnd = p + slash
		}
		if at := strings.LastIndexByte(t[p:authEnd], '@'); at >= 0 {
			out = append(out, span{p, p + at})
			p += at + 1
		} else if bad := badPort(t[p:authEnd]); bad > 0 {
			// "user:password" cut before its '@'.
			out = append(out, span{p, p + bad})
		}
		if inRun {
			continue
		}
		if h := strings.IndexByte(t[p:e], '#'); h >= 0 {
			out = append(out, span{p + h + 1, e})
			e = p + h
		}
		if q := strings.IndexByte(t[p:e], '?'); q >= 0 {
			out = append(out, querySecrets(t, p+q+1, e)...)
		}
	}
}

// badPort returns the length of the authority a, written without '@',
// up to its query or fragment, if it is not a host and a port (a name, or
// an IPv6 address in brackets, then digits after one ':'), as a password
// is when a text was cut before the '@' that ends it; else 0.
func badPort(a string) int {
	if end := strings.IndexAny(a, "?#"); end >= 0 {
		a = a[:end]
	}
	port := ""
	if strings.HasPrefix(a, "[") {
		shut := strings.IndexByte(a, ']')
		if shut < 0 || !ipv6(a[1:shut]) {
			return len(a)
		}
		port = a[shut+1:]
		if port != "" && port[0] != ':' {
			return len(a)
		}
	} else if colon := strings.IndexByte(a, ':'); colon >= 0 {
		port = a[colon:]
	}
	if strings.Trim(strings.TrimPrefix(port, ":"), "0123456789") != "" {
		return len(a)
	}
	return 0
}

// ipv6 reports whether a is written as an IPv6 address is: hex digits,
// ':' and '.', or with a zone after '%'.
func ipv6(a string) bool {
	return strings.Trim(a, "0123456789abcdefABCDEF:.") == "" || strings.Contains(a, "%")
}

// endsURL reports whether c ends a URL written in a text.
func endsURL(c byte) bool {
	return c <= ' ' || c == 0x7f || strings.IndexByte("\"'<>\\`", c) >= 0
}

// querySecrets returns the values of the query t[p:e], and its keys
// written without one.
func querySecrets(t string, p, e int) []span {
	var out []span
	for p < e {
		n := p
		for n < e && t[n] != '&' && t[n] != ';' {
			n++
		}
		if eq := strings.IndexByte(t[p:n], '='); eq >= 0 {
			out = append(out, span{p + eq + 1, n})
		} else {
			out = append(out, span{p, n})
		}
		p = n + 1
	}
	return out
}

var (
	// pair is a name, its closing quote if any, a separator and the
	// spaces around it ('+' is a space percent-encoded as a form is).
	pair = regexp.MustCompile(`([A-Za-z0-9_.\-]+)(["'` + "`" + `]?)[ \t+]*(=>|:|=|,)[ \t+]*`)
	// flag is a command line's option and the spaces before its value.
	flag = regexp.MustCompile(`(--?[A-Za-z][A-Za-z0-9_.\-]*)[ \t+]+`)
	// scheme is an authorization scheme whose credentials follow it.
	scheme = regexp.MustCompile(`(?i)(bearer|basic)[ \t+]+([^\s"'<>\\,;()\[\]{}` + "`" + `]+)`)
	// jwt is a JSON Web Token: a JSON header, a payload and a signature.
	jwt = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`)
)

// pairSecrets returns the values after the names that hold a secret's
// word.
func pairSecrets(sc *scanner) []span {
	t := sc.t
	var out []span
	for _, m := range pair.FindAllStringSubmatchIndex(t, -1) {
		name := t[m[2]:m[3]]
		if !secretName(name) {
			continue
		}
		closed := m[4] < m[5]
		sep, vs := t[m[6]:m[7]], m[1]
		switch {
		case sep == ",":
			// ("name", "value"): a pair in a list of them.
			opened := m[2] > 0 && isQuote(t[m[2]-1])
			if !closed || !opened || vs == len(t) || !isQuote(t[vs]) {
				continue
			}
		case sep == ":" && strings.HasPrefix(t[vs:], "//"):
			continue // a URL's scheme
		}
		out = append(out, sc.value(vs, headerName(name) || sep == ":" && !closed))
	}
	return out
}

// flagSecrets returns the values of the options that carry a secret.
func flagSecrets(sc *scanner) []span {
	t := sc.t
	var out []span
	for _, m := range flag.FindAllStringSubmatchIndex(t, -1) {
		name := t[m[2]:m[3]]
		if m[2] > 0 && strings.IndexByte(" \t\n\r\"'([,=+", t[m[2]-1]) < 0 {
			continue // not an option: part of a word
		}
		switch name {
		case "-u", "--user", "-U", "--proxy-user":
		default:
			if !secretName(name) {
				continue
			}
		}
		out = append(out, sc.value(m[1], false))
	}
	return out
}

// schemeSecrets returns the Bearer and Basic credentials in t that do not
// read as prose.
func schemeSecrets(t string) []span {
	var out []span
	for _, m := range scheme.FindAllStringSubmatchIndex(t, -1) {
		v := t[m[4]:m[5]]
		if !prose(v) || strings.EqualFold(t[m[2]:m[3]], "basic") && basicPair(v) {
			out = append(out, span{m[4], m[5]})
		}
	}
	return out
}

// secretWords are the words that make a name a secret's, its letters in
// lower case and without '-', '_' or '.'.
var secretWords = []string{"password", "passwd", "passphrase", "pwd", "secret", "token", "apikey", "accesskey",
	"privatekey", "credential", "authorization", "cookie", "sessionid", "sessid", "jwt", "signature", "bearer"}

var nameJoins = strings.NewReplacer("-", "", "_", "", ".", "")

// secretName reports whether name is a secret's: it holds one of
// secretWords, or is auth, key, pw, sig or sid, whatever its letter case
// and its '-', '_' and '.'.
func secretName(name string) bool {
	n := strings.ToLower(nameJoins.Replace(name))
	switch n {
	case "auth", "key", "pw", "sig", "sid":
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// headerName reports whether name is a header's whose value runs to the
// end of its line: Authorization, Proxy-Authorization, Cookie, Set-Cookie.
func headerName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "authorization") || strings.Contains(n, "cookie")
}

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// endsValue reports whether c ends an unquoted value that does not run to
// the end of its line.
func endsValue(c byte) bool {
	return c <= ' ' || c == 0x7f || strings.IndexByte("&;,)]}<>\"'`\\", c) >= 0
}

// prose reports whether v, without the punctuation after it, reads as a
// word: up to 24 letters, in lower case after the first.
func prose(v string) bool {
	v = strings.TrimRight(v, ".:!?")
	if v == "" || len(v) > 24 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || i == 0 && 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// basicPair reports whether v decodes from base64 to a "user:password"
// pair.
func basicPair(v string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil && strings.IndexByte(string(b), ':') >= 0 {
			return true
		}
	}
	return false
}
