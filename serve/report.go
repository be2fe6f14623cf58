package serve

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/junit"
	"github.com/connaudit/connaudit/internal/text"
)

// textWidth is the width the text report fits.
const textWidth = 100

// WriteText writes one session's verdicts as a table within 100 columns —
// scenario, the caller's outcome in the audit's vocabulary, attempts the
// kit reported and requests the server saw, what became of the faulted
// connection (reused, open, closed), the call's time, result — with who
// closed the connection and why, and each failure's mismatches and fix,
// under its row, then the findings and the totals ([SessionReport.Counts]).
func (r *SessionReport) WriteText(w io.Writer) error {
	var b strings.Builder
	title := strings.TrimSpace(r.Client.Name+" "+r.Client.Version) + fmt.Sprintf(" (kit %s, session %s)", r.Kit, r.Session)
	b.WriteString(strings.Join(text.Wrap(title, "", "    ", textWidth), "\n") + "\n")
	if r.Client.Config != "" {
		b.WriteString(strings.Join(text.Wrap(r.Client.Config, "  ", "    ", textWidth), "\n") + "\n")
	}
	rows := [][]string{{"SCENARIO", "OUTCOME", "SENT/SEEN", "CONNECTION", "TIME", "RESULT"}}
	unders := [][]string{nil}
	for _, res := range r.Results {
		var under []string
		row := []string{res.Name, "", "-", "-", "-", ""}
		switch {
		case res.NotReported:
			row[1], row[5] = "not reported", "FAIL"
		case res.NotConfigurable != "":
			row[1], row[5] = "not configurable", "N/A"
			under = append(under, text.Wrap(text.FirstLine(res.NotConfigurable), "  - ", "    ", textWidth)...)
		case res.Skipped != "":
			row[1], row[5] = "not run", "SKIP"
			under = append(under, text.Wrap(text.FirstLine(res.Skipped), "  - ", "    ", textWidth)...)
		default:
			row[1] = outcomeText(res)
			sent := "?"
			if res.Attempts != nil {
				sent = fmt.Sprint(*res.Attempts)
			}
			row[2] = fmt.Sprintf("%s/%d", sent, res.Server.Requests)
			if res.Contract != "" && (res.Contract[0] == 'W') {
				row[2] += fmt.Sprintf(" w%d", res.Server.Writes)
			}
			if res.HiddenRetry {
				row[2] += " hidden"
			}
			var closed string
			row[3], closed = fateText(res.Fate)
			if closed != "" && !res.Unbounded {
				under = append(under, closed)
			}
			row[4] = fmt.Sprintf("%.3fs", res.ElapsedMS/1000)
			row[5] = "PASS"
			if !res.Pass {
				row[5] = "FAIL"
			}
		}
		if !res.Pass {
			for _, m := range res.Mismatches {
				under = append(under, text.Wrap(text.FirstLine(m), "  - ", "    ", textWidth)...)
			}
			if res.Fix != "" {
				under = append(under, text.Wrap(res.Fix, "  fix: ", "    ", textWidth)...)
			}
		}
		for _, f := range res.Findings {
			under = append(under, text.Wrap(text.FirstLine(f.Text), "  finding ("+string(f.Class)+"): ", "    ", textWidth)...)
		}
		rows, unders = append(rows, row), append(unders, under)
	}
	writeTable(&b, rows, unders)
	for _, f := range r.Findings {
		if f.Scenario != "" {
			continue // under its scenario's row
		}
		finding := f.Text
		if f.Fix != "" {
			finding += "; fix: " + f.Fix
		}
		b.WriteString(strings.Join(text.Wrap(finding, "FINDING ("+string(f.Class)+"): ", "    ", textWidth), "\n") + "\n")
	}
	if r.Error != "" {
		b.WriteString(strings.Join(text.Wrap(r.Error, "ERROR: ", "    ", textWidth), "\n") + "\n")
	}
	if r.Limits != "" {
		b.WriteString(strings.Join(text.Wrap(r.Limits, "note: ", "    ", textWidth), "\n") + "\n")
	}
	fmt.Fprintf(&b, "%s in %.1fs\n", r.Counts(), r.ElapsedMS/1000)
	_, err := io.WriteString(w, b.String())
	return err
}

// Counts says the session's scenarios by verdict, every scenario offered
// counted once: "45 passed, 2 failed, 4 not configurable, 2 skipped, 0
// not reported". A kit's own count of what it reported leaves out what
// it never reported.
func (r *SessionReport) Counts() string {
	return fmt.Sprintf("%d passed, %d failed, %d not configurable, %d skipped, %d not reported",
		r.Passed, r.Failed, r.NotConfigurable, r.Skipped, r.NotReported)
}

// fateText is the CONNECTION cell — reused, open, closed, "-" — and, for
// a closed connection, who closed it and why, the line under the row, as
// the audit's report says it: "  closed by client: request-error".
func fateText(fate string) (cell, under string) {
	rest, ok := strings.CutPrefix(fate, "closed by ")
	if !ok {
		return fate, ""
	}
	who, why, _ := strings.Cut(strings.TrimSuffix(rest, ")"), " (")
	return "closed", "  closed by " + who + ": " + why
}

// outcomeText is the OUTCOME cell: ok(200), unbounded, a class.
func outcomeText(res Result) string {
	switch {
	case res.Unbounded:
		return "unbounded"
	case res.Class == "ok" && res.Caller != nil:
		return fmt.Sprintf("ok(%d)", res.Caller.Status)
	}
	return string(res.Class)
}

// writeTable writes rows in columns, shrinking the CONNECTION and OUTCOME
// columns (cut with "…") should they not fit textWidth, each row's lines
// under it.
func writeTable(b *strings.Builder, rows [][]string, unders [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := func() int {
		t := 0
		for _, w := range widths {
			t += w + 2
		}
		return t - 2
	}
	for _, i := range []int{3, 1, 0} {
		for total() > textWidth && widths[i] > 10 {
			widths[i]--
		}
	}
	for k, r := range rows {
		var line strings.Builder
		for i, c := range r {
			c = text.Cut(c, widths[i])
			pad := widths[i] - utf8.RuneCountInString(c)
			if i == 4 {
				line.WriteString(strings.Repeat(" ", pad) + c)
			} else {
				line.WriteString(c)
				if i < len(r)-1 {
					line.WriteString(strings.Repeat(" ", pad))
				}
			}
			if i < len(r)-1 {
				line.WriteString("  ")
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
		for _, u := range unders[k] {
			b.WriteString(u + "\n")
		}
	}
}

// WriteJSON writes the reports as one JSON object:
// {"protocol": …, "sessions": [ … ]}.
func WriteJSON(w io.Writer, reports []*SessionReport) error {
	js := newJSONStream(w)
	for _, r := range reports {
		js.add(r)
	}
	return js.close()
}

// WriteJUnit writes the reports as JUnit XML: a test suite per session
// (named for the client), a test case per scenario.
func WriteJUnit(w io.Writer, reports []*SessionReport) error {
	st := junit.NewStream(w)
	for _, r := range reports {
		st.Add(junitSuite(r))
	}
	return st.Close()
}

// junitSuite is a session's JUnit test suite.
func junitSuite(r *SessionReport) junit.Suite {
	s := junit.Suite{Name: "connaudit serve: " + r.Client.Name + " " + r.Client.Version, Time: fmt.Sprintf("%.3f", r.ElapsedMS/1000)}
	for _, res := range r.Results {
		c := junit.Case{Name: res.Name, Classname: "connaudit.serve." + r.Client.Name, Time: fmt.Sprintf("%.3f", res.ElapsedMS/1000)}
		switch {
		case res.NotConfigurable != "":
			c.Skipped = &junit.Skipped{Message: "not configurable: " + res.NotConfigurable}
			s.Skipped++
		case res.Skipped != "":
			c.Skipped = &junit.Skipped{Message: res.Skipped}
			s.Skipped++
		case !res.Pass:
			body := strings.Join(res.Mismatches, "\n")
			if res.Fix != "" {
				body += "\nfix: " + res.Fix
			}
			c.Failure = &junit.Failure{Message: text.FirstLine(strings.Join(res.Mismatches, "; ")), Text: body}
			s.Failures++
		}
		for _, f := range res.Findings {
			c.SystemOut += "finding (" + string(f.Class) + "): " + f.Text + "\n"
		}
		s.Cases = append(s.Cases, c)
		s.Tests++
	}
	// The client as a whole: its failing findings and the session's error
	// fail a case of their own, so that the XML fails when the session
	// does.
	var whole []string
	for _, f := range r.Findings {
		if f.Fails {
			text := "finding (" + string(f.Class) + "): " + f.Text
			if f.Fix != "" {
				text += "; fix: " + f.Fix
			}
			whole = append(whole, text)
		}
	}
	if r.Error != "" {
		whole = append(whole, r.Error)
	}
	if len(whole) > 0 {
		c := junit.Case{Name: "(the client as a whole)", Classname: "connaudit.serve." + r.Client.Name, Time: "0.000",
			Failure: &junit.Failure{Message: text.FirstLine(whole[0]), Text: strings.Join(whole, "\n")}}
		s.Cases = append(s.Cases, c)
		s.Tests++
		s.Failures++
	}
	return s
}
