package redact

import "strings"

// A scanner finds where the values in a text end. Its searches are asked
// from positions that only grow, and each remembers its last answer, so
// that a text of many values, each running to the same end, is read once:
// the work is linear in the text's length.
type scanner struct {
	t string
	// Each search's last start and answer.
	urlEnd, delim, softLine, hardLine memo
	quote                             [3]memo // ", ', `
	brackets                          map[byte][]int
}

// memo is a search's last start and answer: no match in t[from:at].
type memo struct{ from, at int }

// next returns the first k >= i with end(t[k]), or len(t).
func (sc *scanner) next(m *memo, i int, end func(byte) bool) int {
	if m.at > 0 && m.from <= i && i <= m.at {
		return m.at
	}
	k := i
	for k < len(sc.t) && !end(sc.t[k]) {
		k++
	}
	*m = memo{i, k}
	return k
}

// value returns where the value that starts at t[i] is: inside its quotes
// (after a b, u, r or f prefix) or brackets, or else to the end of its
// line if toLine, to the next space or delimiter ([endsValue]) if not.
func (sc *scanner) value(i int, toLine bool) span {
	t := sc.t
	if i == len(t) {
		return span{i, i}
	}
	j := i
	if strings.IndexByte("bBuUrRfF", t[j]) >= 0 && j+1 < len(t) && isQuote(t[j+1]) {
		j++
	}
	switch c := t[j]; c {
	case '"', '\'', '`':
		return span{j + 1, sc.closingQuote(j+1, c)}
	case '[', '(', '{':
		return span{j + 1, sc.closingBracket(j)}
	}
	if toLine {
		return span{i, sc.lineEnd(i, true)}
	}
	return span{i, sc.next(&sc.delim, i, endsValue)}
}

// lineEnd returns where the line that t[i] is on ends: at a line break,
// or, if escaped, at one written escaped (\n, \r), or at the end of t.
func (sc *scanner) lineEnd(i int, escaped bool) int {
	t := sc.t
	if !escaped {
		return sc.next(&sc.hardLine, i, func(c byte) bool { return c == '\n' || c == '\r' })
	}
	m := &sc.softLine
	if m.at > 0 && m.from <= i && i <= m.at {
		return m.at
	}
	k := i
	for ; k < len(t); k++ {
		if c := t[k]; c == '\n' || c == '\r' || c == '\\' && k+1 < len(t) && (t[k+1] == 'n' || t[k+1] == 'r') {
			break
		}
	}
	*m = memo{i, k}
	return k
}

// closingQuote returns where the quote q that ends the text from t[i] is:
// the first q on the line not escaped by an odd count of backslashes,
// else the line's end.
func (sc *scanner) closingQuote(i int, q byte) int {
	t := sc.t
	end := sc.lineEnd(i, false)
	m := &sc.quote[strings.IndexByte("\"'`", q)]
	if m.at > 0 && m.from <= i && i <= m.at {
		return min(m.at, end)
	}
	k := i
	for ; k < end; k++ {
		if t[k] != q {
			continue
		}
		n := 0
		for k-n-1 >= 0 && t[k-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			break
		}
	}
	*m = memo{i, k}
	return k
}

// closingBracket returns where the bracket that closes t[open] is, on
// its line (brackets of its kind nest), else the line's end.
func (sc *scanner) closingBracket(open int) int {
	c := sc.t[open]
	if sc.brackets == nil {
		sc.brackets = map[byte][]int{}
	}
	match, ok := sc.brackets[c]
	if !ok {
		match = matchBrackets(sc.t, c, map[byte]byte{'[': ']', '(': ')', '{': '}'}[c])
		sc.brackets[c] = match
	}
	if match[open] >= 0 {
		return match[open]
	}
	return sc.lineEnd(open+1, false)
}

// matchBrackets returns, for each open in t, where the shut that closes it
// on its line is, or -1.
func matchBrackets(t string, open, shut byte) []int {
	match := make([]int, len(t))
	var stack []int
	for k := 0; k < len(t); k++ {
		match[k] = -1
		switch t[k] {
		case open:
			stack = append(stack, k)
		case shut:
			if len(stack) > 0 {
				match[stack[len(stack)-1]] = k
				stack = stack[:len(stack)-1]
			}
		case '\n', '\r':
			stack = stack[:0]
		}
	}
	return match
}
