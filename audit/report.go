package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/junit"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
)

// textWidth is the width, in columns, that the text report fits: a row per
// scenario, and under a failed row its reasons and fix, wrapped.
const textWidth = 100

// WriteText writes the report as a table that fits 100 columns — scenario,
// observed outcome, requests the client sent and the server saw (with
// writes committed and hidden retries), what became of the faulted
// request's connection ([FateKind]: reused, open, closed, none; dialing
// when the guard ended a dial), time, result — with who closed the
// connection and why, and every mismatch of a failed scenario and its fix,
// directly under its row, then the reasons scenarios were skipped, the
// findings and the totals. A skipped scenario's row says "not run" (or
// "cut: no verdict", when the run ended while it ran) and SKIP. With verbose, each scenario's fault, reference bound, notes and
// timeline follow the table: the full details, which the JSON holds too.
func (r Report) WriteText(w io.Writer, verbose bool) error {
	var b strings.Builder
	t := table{heads: []string{"SCENARIO", "OUTCOME", "SENT/SEEN", "CONNECTION", "TIME", "RESULT"},
		right: []bool{false, false, false, false, true, false},
		// The outcome, then the connection, give way (cut with "…") when
		// the table is too wide.
		shrink: []int{0, 1, 0, 2, 0, 0}}
	var skips []skipGroup
	for _, res := range r.Results {
		if res.Skipped != "" {
			skips = addSkip(skips, res)
		}
		addRow(&t, res)
	}
	t.write(&b, textWidth)
	for _, l := range text.Wrap(sentSeenKey, "", "    ", textWidth) {
		b.WriteString(l + "\n")
	}
	r.writeSkips(&b, skips)
	r.writeFindings(&b)
	if verbose {
		for _, res := range r.Results {
			if res.Skipped == "" && res.NotConfigurable == "" {
				writeDetails(&b, res)
			}
		}
	}
	r.writeTotals(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// sentSeenKey explains the SENT/SEEN column, under the table.
const sentSeenKey = "SENT/SEEN: the caller's attempts / the requests the server read; hidden: net/http sent " +
	"one again by itself; wN: the writes the server committed; (exp): as the scenario expects"

// addRow adds a result's row to t, and under it who closed the connection
// and why, and a failure's mismatches and fix.
func addRow(t *table, res Result) {
	name := redact.Printable(res.Name)
	switch {
	case res.Skipped != "":
		outcome := "not run"
		if strings.HasPrefix(res.Skipped, "cut: ") {
			outcome = "cut: no verdict"
		}
		t.add(name, outcome, "-", "-", "-", "SKIP")
		return
	case res.NotConfigurable != "":
		t.add(name, "not configurable", "-", "-", "-", "N/A")
		t.under(text.Wrap(redact.Printable(text.FirstLine(res.NotConfigurable)), "  - ", "    ", textWidth)...)
		return
	}
	o := res.Observed
	got := outcomeText(o.Class, o.Status)
	switch {
	case o.Unbounded:
		got = "unbounded"
	case o.Beyond != "":
		got = "beyond the guard"
	}
	result := "PASS"
	if !res.Pass {
		result = "FAIL"
	}
	t.add(name, got, sentText(res), connText(o), fmt.Sprintf("%.3fs", res.Elapsed.Seconds()), result)
	if f := o.Fate; f.ClosedBy != "" && !o.Unbounded && o.Beyond == "" {
		t.under(closedText(res.Expected, f))
	}
	if res.Pass {
		return
	}
	for _, m := range res.Mismatches {
		t.under(text.Wrap(redact.Printable(text.FirstLine(m)), "  - ", "    ", textWidth)...)
	}
	if res.Fix != "" {
		t.under(text.Wrap(redact.Printable(res.Fix), "  fix: ", "    ", textWidth)...)
	}
}

// closedText says who closed the faulted request's connection and why.
// A scenario that leaves a body open on purpose (Expect.Leak) closes it
// itself once the pool's check has seen it, which over HTTP/1 closes the
// connection as an early close: the audit's doing, not the client's.
func closedText(e Expect, f Fate) string {
	if e.Leak && f.ClosedBy == vocab.ClosedByClient && f.Reason == vocab.ReasonEarlyBodyClose {
		return fmt.Sprintf("  closed by the audit: it closed the body left open once the check had found it (%s)", f.Reason)
	}
	return fmt.Sprintf("  closed by %s: %s", f.ClosedBy, redact.Printable(string(f.Reason)))
}

// writeSkips writes why scenarios were skipped, and how to make them run
// where a finding does not say it already.
func (r Report) writeSkips(b *strings.Builder, skips []skipGroup) {
	for _, g := range skips {
		b.WriteString("\n")
		for _, l := range text.Wrap(fmt.Sprintf("%d skipped (%s): %s", len(g.names), nameList(g.names, 60), redact.Printable(g.reason)), "", "    ", textWidth) {
			b.WriteString(l + "\n")
		}
		if g.fix != "" && !slices.ContainsFunc(r.Findings, func(f string) bool { return strings.HasSuffix(f, "; fix: "+g.fix) }) {
			for _, l := range text.Wrap(redact.Printable(g.fix), "  fix: ", "    ", textWidth) {
				b.WriteString(l + "\n")
			}
		}
	}
}

// writeFindings writes each finding and its fix.
func (r Report) writeFindings(b *strings.Builder) {
	for _, f := range r.Findings {
		b.WriteString("\n")
		problem, fix, _ := strings.Cut(f, "; fix: ")
		for _, l := range text.Wrap(redact.Printable(problem), "FINDING: ", "    ", textWidth) {
			b.WriteString(l + "\n")
		}
		if fix != "" {
			for _, l := range text.Wrap(redact.Printable(fix), "  fix: ", "    ", textWidth) {
				b.WriteString(l + "\n")
			}
		}
	}
}

// writeTotals writes the counts, the time and what was audited.
func (r Report) writeTotals(b *strings.Builder) {
	skipped := ""
	if r.Skipped > 0 {
		skipped = fmt.Sprintf(", %d skipped", r.Skipped)
	}
	if r.NotConfigurable > 0 {
		skipped += fmt.Sprintf(", %d not configurable", r.NotConfigurable)
	}
	findings := ""
	if n := len(r.Findings); n > 0 {
		findings = fmt.Sprintf(", %d finding%s", n, pluralSuffix(n))
	}
	b.WriteString("\n")
	for _, l := range text.Wrap(fmt.Sprintf("%d passed, %d failed%s%s in %s (%s)", r.Passed, r.Failed, skipped,
		findings, r.Elapsed.Round(time.Millisecond), r.waitText()), "", "    ", textWidth) {
		b.WriteString(l + "\n")
	}
	meant := ""
	if r.Protocols != "" {
		meant = "; protocols meant: " + r.Protocols
	}
	retryLayer := ""
	if r.Retry != "" {
		retryLayer = "; retry: " + redact.Printable(r.Retry)
		if r.RetryRow != "" {
			retryLayer += " (" + r.RetryRow + ")"
		}
	}
	for _, l := range text.Wrap(fmt.Sprintf("%s%s%s; %s", redact.Printable(r.Transport), meant, retryLayer, r.GoVersion), "", "    ", textWidth) {
		b.WriteString(l + "\n")
	}
}

// waitText says what the scenarios wait for by their nature (a bound that
// must fire, a body spread over time), summed over scenarios that may have
// run side by side: "their own waits, summed over 8 run at once: 7.54s".
func (r Report) waitText() string {
	at := ""
	switch {
	case r.Parallel == 1:
		at = " run one at a time"
	case r.Parallel > 1:
		at = fmt.Sprintf(" run %d at once", r.Parallel)
	}
	return fmt.Sprintf("the scenarios' own waits, summed over those%s: %s", at, r.Wait.Round(time.Millisecond))
}

// writeDetails writes a scenario's full details: fault, reference bound,
// mismatches, fix, leaks found, notes and timeline.
func writeDetails(b *strings.Builder, res Result) {
	b.WriteString("\n")
	head := fmt.Sprintf("%s (%s): fault: %s; reference bound: %s", redact.Printable(res.Name), res.Proto,
		redact.Printable(res.Fault), redact.Printable(res.Bound))
	for _, l := range text.Wrap(head, "", "    ", textWidth) {
		b.WriteString(l + "\n")
	}
	if res.Skipped != "" {
		fmt.Fprintf(b, "  skipped: %s\n", printableLines(res.Skipped, "    "))
	}
	for _, m := range res.Mismatches {
		fmt.Fprintf(b, "  - %s\n", printableLines(m, "    "))
	}
	if res.Fix != "" {
		fmt.Fprintf(b, "  fix: %s\n", printableLines(res.Fix, "    "))
	}
	for _, l := range res.Observed.LeakFound {
		fmt.Fprintf(b, "  found while leaking: %s\n", redact.Printable(text.FirstLine(l)))
	}
	for _, l := range res.Observed.Leaks {
		fmt.Fprintf(b, "  left after recovery: %s\n", printableLines(l, "    "))
	}
	for _, nt := range res.Observed.Notes {
		fmt.Fprintf(b, "  note: %s\n", printableLines(nt, "    "))
	}
	writeEvidence(b, res)
}

// writeEvidence writes what the server saw of a scenario's writes, and
// the faulted request's timeline: every attempt's, when it took several.
func writeEvidence(b *strings.Builder, res Result) {
	o := res.Observed
	if res.Expected.Writes != nil {
		keys := "none"
		if len(o.Keys) > 0 {
			quoted := make([]string, len(o.Keys))
			for i, k := range o.Keys {
				quoted[i] = redact.Printable(k)
			}
			keys = strings.Join(quoted, ", ")
		}
		fmt.Fprintf(b, "  server: %s, %s committed; idempotency keys received: %s\n",
			text.Plural(o.ServerRequests, "request"), text.Plural(o.Writes, "write"), keys)
	}
	attempts := o.Attempts
	if len(attempts) == 0 && o.Timeline != nil {
		attempts = []*httptrace.Timeline{o.Timeline}
	}
	indent := "  "
	if len(attempts) > 1 {
		indent = "    "
	}
	for i, tl := range attempts {
		if len(attempts) > 1 {
			fmt.Fprintf(b, "  attempt %d of %d:\n", i+1, len(attempts))
		}
		var tb strings.Builder
		tl.WriteText(&tb, true)
		b.WriteString(indentText(tb.String(), indent))
	}
}

// pluralSuffix returns "s" unless n is one.
func pluralSuffix(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// connText says in a word what became of the faulted request's connection:
// reused, open, "-" when it had none, the reason it was closed, or
// "dialing" when the guard ended the request while nothing bounded its
// dial.
func connText(o Observed) string {
	if o.Unbounded || o.Beyond != "" {
		if vocab.SetupStage(o.UnboundedStage) {
			return "dialing"
		}
	}
	return string(o.Fate.Kind())
}

// sentText says how many requests the client sent and the server saw for
// the faulted request, with the writes the server committed and a hidden
// retry, each marked "(exp)" when the scenario expects it: "1/2 hidden
// (exp)" is the evidence of a scenario about hidden retries, "1/2 hidden"
// a retry nobody asked for.
func sentText(res Result) string {
	o, e := res.Observed, res.Expected
	sent := fmt.Sprintf("%d/%d", o.ClientAttempts, o.ServerRequests)
	if e.Writes != nil {
		sent += fmt.Sprintf(" w%d", o.Writes)
		if o.Writes > 1 && o.Writes == *e.Writes {
			sent += " (exp)"
		}
	}
	if o.HiddenRetry {
		sent += " hidden"
		if e.HiddenRetry {
			sent += " (exp)"
		}
	}
	return sent
}

// skipGroup is one reason scenarios were skipped for, and which.
type skipGroup struct {
	reason, fix string
	names       []string
}

func addSkip(gs []skipGroup, res Result) []skipGroup {
	name := redact.Printable(res.Name)
	for i := range gs {
		if gs[i].reason == res.Skipped && gs[i].fix == res.Fix {
			gs[i].names = append(gs[i].names, name)
			return gs
		}
	}
	return append(gs, skipGroup{reason: res.Skipped, fix: res.Fix, names: []string{name}})
}

// nameList joins the names that fit in about width runes, and says how
// many more there are.
func nameList(names []string, width int) string {
	out := names[0]
	for i, n := range names[1:] {
		more := fmt.Sprintf(" and %d more", len(names)-1-i)
		if text.Width(out)+2+text.Width(n) > width-text.Width(more) && i < len(names)-2 {
			return out + "," + more
		}
		out += ", " + n
	}
	return out
}

// table lays out rows of cells in columns, each as wide as its widest
// cell, with lines of text under a row that do not count in the widths.
type table struct {
	heads  []string
	right  []bool // right-aligned columns
	shrink []int  // the order in which columns give way (0: never)
	rows   [][]string
	unders [][]string
}

func (t *table) add(cells ...string) {
	t.rows = append(t.rows, cells)
	t.unders = append(t.unders, nil)
}

func (t *table) under(lines ...string) {
	t.unders[len(t.unders)-1] = append(t.unders[len(t.unders)-1], lines...)
}

// write writes the table, cutting the cells of the columns that give way
// until the rows fit width, as far as the others let them.
func (t *table) write(b *strings.Builder, width int) {
	const gap = 2
	w := make([]int, len(t.heads))
	for i, h := range t.heads {
		w[i] = text.Width(h)
	}
	for _, row := range t.rows {
		for i, c := range row {
			w[i] = max(w[i], text.Width(c))
		}
	}
	total := func() int {
		n := gap * (len(w) - 1)
		for _, x := range w {
			n += x
		}
		return n
	}
	for order := 1; order <= len(w) && total() > width; order++ {
		for i := range w {
			if t.shrink[i] == order {
				w[i] = max(text.Width(t.heads[i]), w[i]-(total()-width))
			}
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		for i, c := range cells {
			c = text.Cut(c, w[i])
			pad := strings.Repeat(" ", w[i]-text.Width(c))
			switch {
			case t.right[i]:
				l.WriteString(pad + c)
			case i < len(cells)-1:
				l.WriteString(c + pad)
			default:
				l.WriteString(c)
			}
			if i < len(cells)-1 {
				l.WriteString(strings.Repeat(" ", gap))
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	line(t.heads)
	for i, row := range t.rows {
		line(row)
		for _, u := range t.unders[i] {
			b.WriteString(u + "\n")
		}
	}
}

// printableLines is redact.Printable for a text of several lines
// (a mismatch or note may quote a server or a user's transport), each line
// after the first indented by indent.
func printableLines(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = redact.Printable(l)
	}
	return strings.Join(lines, "\n"+indent)
}

func outcomeText(c httptrace.Class, status int) string {
	if c == httptrace.ClassOK && status != 0 {
		return fmt.Sprintf("ok(%d)", status)
	}
	if c == "" {
		return "-"
	}
	return string(c)
}

func indentText(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJUnit writes the report as JUnit XML, one test case per scenario,
// for CI systems. A failed case carries every mismatch, the fix and the
// faulted request's timeline; a skipped one a <skipped> element with the
// reason, counted in the suite's skipped attribute. Findings fail a case
// of their own, "findings".
func (r Report) WriteJUnit(w io.Writer) error {
	s := junit.Suite{Name: "connaudit", Tests: len(r.Results), Failures: r.Failed, Skipped: r.Skipped, Time: secs(r.Elapsed)}
	for _, res := range r.Results {
		c := junit.Case{Name: res.Name, Classname: "connaudit." + string(res.Proto), Time: secs(res.Elapsed)}
		if res.Skipped != "" || res.NotConfigurable != "" {
			c.Skipped = &junit.Skipped{Message: res.Skipped}
			if res.NotConfigurable != "" {
				c.Skipped.Message = "not configurable: " + res.NotConfigurable
				s.Skipped++
			}
			s.Cases = append(s.Cases, c)
			continue
		}
		var out strings.Builder
		writeEvidence(&out, res)
		c.SystemOut = out.String()
		if !res.Pass {
			body := strings.Join(res.Mismatches, "\n")
			if res.Fix != "" {
				body += "\nfix: " + res.Fix
			}
			c.Failure = &junit.Failure{Message: text.FirstLine(strings.Join(res.Mismatches, "; ")), Text: body}
		}
		s.Cases = append(s.Cases, c)
	}
	if len(r.Findings) > 0 {
		// The findings fail the run as a whole: a case of their own.
		s.Tests++
		s.Failures++
		s.Cases = append(s.Cases, junit.Case{Name: "findings", Classname: "connaudit.transport", Time: secs(0),
			Failure: &junit.Failure{Message: text.FirstLine(r.Findings[0]), Text: strings.Join(r.Findings, "\n")}})
	}
	return junit.Write(w, junit.Suites{Suites: []junit.Suite{s}})
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
