// Package text lays out the module's text output: a line cut to a width,
// a text wrapped to one, its first line, a count with its noun. Every
// report (audit, serve, probe, compat, the fault server's errors) uses
// these, so that each is written once.
package text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Width is the width of s in columns: its runes.
func Width(s string) int { return utf8.RuneCountInString(s) }

// Cut shortens s to n runes, ending it with "…" if it was longer; n less
// than 1 gives "".
func Cut(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Wrap breaks s into lines of at most width runes at spaces, the first
// starting with first and the others with rest; a word longer than a line
// is cut across lines. Runs of spaces and line breaks in s are one space.
// An empty s is one line, first.
func Wrap(s, first, rest string, width int) []string {
	var lines []string
	cur := first
	empty := true
	for _, word := range strings.Fields(s) {
		for {
			room := width - Width(cur)
			if !empty {
				room-- // the space before the word
			}
			if Width(word) <= room {
				if !empty {
					cur += " "
				}
				cur += word
				empty = false
				break
			}
			if !empty {
				lines = append(lines, cur)
				cur, empty = rest, true
				continue
			}
			// A word longer than a whole line: cut it.
			r := []rune(word)
			n := max(1, width-Width(cur))
			lines = append(lines, cur+string(r[:n]))
			word = string(r[n:])
			cur = rest
			if word == "" {
				break
			}
		}
	}
	if !empty || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

// FirstLine returns s up to its first line break.
func FirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Plural returns n and noun, with an "s" unless n is 1: "1 request",
// "3 requests", "0 writes".
func Plural[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
