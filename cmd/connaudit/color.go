package main

import (
	"io"
	"os"
	"strings"

	"github.com/connaudit/connaudit/probe"
)

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// useColor reports whether output to w may be coloured: a terminal, and
// NO_COLOR not set (to anything, even empty).
func useColor(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	return isTerminal(w)
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
	ansiBold   = "\x1b[1m"
)

func paint(code, s string) string { return code + s + ansiReset }

// severityColor is the colour of a finding's severity word.
func severityColor(s probe.Severity) string {
	switch s {
	case "error":
		return ansiRed
	case "warn":
		return ansiYellow
	}
	return ansiCyan
}

// writeProbeText writes rep's text, coloured if color is set.
func writeProbeText(w io.Writer, rep *probe.Result, verbose, color bool) error {
	if !color {
		return rep.WriteText(w, verbose)
	}
	var b strings.Builder
	if err := rep.WriteText(&b, verbose); err != nil {
		return err
	}
	_, err := io.WriteString(w, colorProbeText(b.String(), rep))
	return err
}

// colorProbeText colours text, rep's text ([probe.Result.WriteText]), for
// a terminal: "probe" in bold at the start of the summary, and each
// finding's severity word in red (error), yellow (warn) or cyan. The
// summary follows the timelines (with -v); the findings, in rep's order,
// each a line and the lines it wraps onto (indented by
// probeFindingIndent), follow its last "findings" heading.
// probeFindingIndent begins the lines a finding wraps onto in probe's
// text.
const probeFindingIndent = "        "

func colorProbeText(text string, rep *probe.Result) string {
	header := "probe " + rep.Method + " " + rep.Target + "\n"
	if i := lineStart(text, header); i >= 0 {
		text = text[:i] + paint(ansiBold, "probe") + text[i+len("probe"):]
	}
	const heading = "\nfindings\n"
	i := strings.LastIndex(text, heading)
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text[:i+len(heading)])
	rest := text[i+len(heading):]
	for _, f := range rep.Findings {
		word := strings.ToUpper(string(f.Severity))
		if !strings.HasPrefix(rest, "  "+word) {
			break
		}
		// The finding's line, and the lines it wraps onto, indented.
		end := 0
		for end < len(rest) && (end == 0 || strings.HasPrefix(rest[end:], probeFindingIndent)) {
			if j := strings.IndexByte(rest[end:], '\n'); j >= 0 {
				end += j + 1
			} else {
				end = len(rest)
			}
		}
		b.WriteString("  " + paint(severityColor(f.Severity), word) + rest[len("  "+word):end])
		rest = rest[end:]
	}
	b.WriteString(rest)
	return b.String()
}

// lineStart returns where the first line of text that is line begins, -1
// if none is.
func lineStart(text, line string) int {
	if strings.HasPrefix(text, line) {
		return 0
	}
	if i := strings.Index(text, "\n"+line); i >= 0 {
		return i + 1
	}
	return -1
}
