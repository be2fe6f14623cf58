package redact

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A view is a text read from another: s decoded once or more. Byte i of
// text came from s[lo[i]:hi[i]], so that what is found in a view can be
// masked where it is written in s.
type view struct {
	text   string
	lo, hi []int
}

// maxViews bounds the views of a text: s and its decodings, three deep.
const (
	viewDepth = 3
	maxViews  = 16
)

// views returns s as written and decoded, each decoding applied to each
// view up to viewDepth deep where it decodes something: backslash escapes,
// percent-encoding, invisible characters dropped.
func views(s string) []view {
	raw := view{text: s, lo: make([]int, len(s)), hi: make([]int, len(s))}
	for i := 0; i < len(s); i++ {
		raw.lo[i], raw.hi[i] = i, i+1
	}
	all := []view{raw}
	seen := map[string]bool{s: true}
	frontier := all
	for range viewDepth {
		var next []view
		for _, v := range frontier {
			for _, dec := range []func(view) (view, bool){unescapeView, percentView, visibleView} {
				w, ok := dec(v)
				if !ok || seen[w.text] || len(all) == maxViews {
					continue
				}
				seen[w.text] = true
				all = append(all, w)
				next = append(next, w)
			}
		}
		frontier = next
	}
	return all
}

// builder writes a view decoded from another.
type builder struct {
	from    view
	text    []byte
	lo, hi  []int
	decoded bool
}

// put writes out as what from.text[i:j] decodes to.
func (b *builder) put(i, j int, out ...byte) {
	for _, c := range out {
		b.text = append(b.text, c)
		b.lo = append(b.lo, b.from.lo[i])
		b.hi = append(b.hi, b.from.hi[j-1])
	}
}

func (b *builder) putRune(i, j int, r rune) {
	b.put(i, j, utf8.AppendRune(nil, r)...)
	b.decoded = true
}

func (b *builder) view() (view, bool) {
	return view{text: string(b.text), lo: b.lo, hi: b.hi}, b.decoded
}

// unescapeView decodes the backslash escapes of JSON, Go, Python and
// JavaScript strings: \" \' \\ \/ \n \r \t \b \f \v \a \0, \xXX, \uXXXX (a
// UTF-16 surrogate pair as one character) and \UXXXXXXXX. Any other
// backslash stays.
func unescapeView(v view) (view, bool) {
	s := v.text
	b := builder{from: v}
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 == len(s) {
			b.put(i, i+1, s[i])
			i++
			continue
		}
		switch c := s[i+1]; c {
		case '"', '\'', '\\', '/':
			b.put(i, i+2, c)
			b.decoded = true
			i += 2
			continue
		case 'n', 'r', 't', 'b', 'f', 'v', 'a', '0':
			b.put(i, i+2, "\n\r\t\b\f\v\a\x00"[strings.IndexByte("nrtbfva0", c)])
			b.decoded = true
			i += 2
			continue
		case 'x':
			if n, ok := hexAt(s, i+2, 2); ok {
				b.put(i, i+4, byte(n))
				b.decoded = true
				i += 4
				continue
			}
		case 'u':
			if n, ok := hexAt(s, i+2, 4); ok {
				r, end := rune(n), i+6
				if 0xd800 <= r && r < 0xdc00 && end+1 < len(s) && s[end] == '\\' && s[end+1] == 'u' {
					if m, ok := hexAt(s, end+2, 4); ok && 0xdc00 <= m && m < 0xe000 {
						r, end = 0x10000+(r-0xd800)<<10+(rune(m)-0xdc00), end+6
					}
				}
				b.putRune(i, end, r)
				i = end
				continue
			}
		case 'U':
			if n, ok := hexAt(s, i+2, 8); ok && n <= unicode.MaxRune {
				b.putRune(i, i+10, rune(n))
				i += 10
				continue
			}
		}
		b.put(i, i+1, '\\')
		i++
	}
	return b.view()
}

// percentView decodes %XX, with hex digits in either case; a '+' stays.
func percentView(v view) (view, bool) {
	s := v.text
	b := builder{from: v}
	for i := 0; i < len(s); {
		if s[i] == '%' {
			if n, ok := hexAt(s, i+1, 2); ok {
				b.put(i, i+3, byte(n))
				b.decoded = true
				i += 3
				continue
			}
		}
		b.put(i, i+1, s[i])
		i++
	}
	return b.view()
}

// visibleView drops the characters a terminal does not show (Unicode's
// format characters: zero-width spaces and joiners, bidirectional marks,
// the byte order mark), which may hide a name in plain sight.
func visibleView(v view) (view, bool) {
	s := v.text
	b := builder{from: v}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if invisible(r) {
			b.decoded = true
		} else {
			for k := range size {
				b.put(i+k, i+k+1, s[i+k])
			}
		}
		i += size
	}
	return b.view()
}

// hexAt returns the number written in hex in s[i:i+n].
func hexAt(s string, i, n int) (uint32, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var v uint32
	for _, c := range []byte(s[i : i+n]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// invisible reports whether r is a character a terminal does not show
// and that may reorder or hide what it does: Unicode's format characters
// (bidirectional embeddings, overrides, isolates and marks, zero-width
// spaces and joiners, the byte order mark, soft hyphen, tags) and the
// Hangul fillers, which are blank.
func invisible(r rune) bool {
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0':
		return true
	}
	return r >= 0x80 && unicode.Is(unicode.Cf, r)
}
