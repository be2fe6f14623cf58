package audit

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

// WriteText writes the report as a table — scenario, expected, observed,
// stage, attempts client/server, dials, recovered, leaks, time — followed by
// every mismatch of each failed scenario with its faulted request's
// timeline, and the totals. A skipped scenario's row says "not run" and
// SKIP. With verbose, every scenario's timeline is written.
func (r Report) WriteText(w io.Writer, verbose bool) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tEXPECTED\tOBSERVED\tSTAGE\tCLIENT/SERVER\tDIALS\tCONNECTION\tRECOVERED\tLEAKS\tTIME\tRESULT")
	for _, res := range r.Results {
		o := res.Observed
		exp := outcomeText(res.Expected.Class, res.Expected.Status)
		if res.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\tnot run\t-\t-\t-\t-\t-\t-\t-\tSKIP\n", redact.Printable(res.Name), exp)
			continue
		}
		if res.NotConfigurable != "" {
			fmt.Fprintf(tw, "%s\t%s\tnot configurable\t-\t-\t-\t-\t-\t-\t-\tN/A\n", redact.Printable(res.Name), exp)
			continue
		}
		got := outcomeText(o.Class, o.Status)
		if o.Unbounded {
			got = "unbounded"
		}
		attempts := fmt.Sprintf("%d/%d", o.ClientAttempts, o.ServerRequests)
		if o.HiddenRetry {
			attempts += " hidden retry"
		}
		result := "PASS"
		if !res.Pass {
			result = "FAIL"
		}
		leaks := "0"
		if len(o.Leaks) > 0 {
			leaks = fmt.Sprint(len(o.Leaks))
		}
		if len(o.LeakFound) > 0 {
			leaks += fmt.Sprintf(" (found %d while leaking)", len(o.LeakFound))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", redact.Printable(res.Name), exp, got, orDash(string(o.Stage)), attempts,
			o.Dials, redact.Printable(o.Fate.String()), yesNo(o.Recovered), leaks, fmt.Sprintf("%7.3fs", res.Elapsed.Seconds()), result)
	}
	tw.Flush()
	for _, res := range r.Results {
		if (res.Pass && !verbose) || res.Skipped != "" {
			continue
		}
		if res.NotConfigurable != "" {
			fmt.Fprintf(&b, "\n%s (%s): not configurable: %s\n", redact.Printable(res.Name), res.Contract, printableLines(res.NotConfigurable, "  "))
			continue
		}
		fmt.Fprintf(&b, "\n%s (%s): fault: %s; bound: %s\n", redact.Printable(res.Name), res.Proto, redact.Printable(res.Fault), redact.Printable(res.Bound))
		for _, m := range res.Mismatches {
			fmt.Fprintf(&b, "  - %s\n", printableLines(m, "    "))
		}
		for _, l := range res.Observed.LeakFound {
			fmt.Fprintf(&b, "  found while leaking: %s\n", redact.Printable(firstLine(l)))
		}
		for _, nt := range res.Observed.Notes {
			fmt.Fprintf(&b, "  note: %s\n", printableLines(nt, "    "))
		}
		writeEvidence(&b, res)
	}
	skipped := ""
	if r.Skipped > 0 {
		skipped = fmt.Sprintf(", %d skipped", r.Skipped)
	}
	if r.NotConfigurable > 0 {
		skipped += fmt.Sprintf(", %d not configurable", r.NotConfigurable)
	}
	client := redact.Printable(r.Transport)
	if r.Retry != "" {
		client += "; retry: " + redact.Printable(r.Retry)
	}
	fmt.Fprintf(&b, "\n%d passed, %d failed%s in %s (the scenarios inherently wait %s); %s, %s\n",
		r.Passed, r.Failed, skipped, r.Elapsed.Round(time.Millisecond), r.Wait.Round(time.Millisecond), client, r.GoVersion)
	_, err := io.WriteString(w, b.String())
	return err
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
			plural(o.ServerRequests, "request"), plural(o.Writes, "write"), keys)
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
	if c == vocab.ClassOK && status != 0 {
		return fmt.Sprintf("ok(%d)", status)
	}
	if c == "" {
		return "-"
	}
	return string(c)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
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

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML, one test case per scenario,
// for CI systems. A failed case carries every mismatch and the faulted
// request's timeline; a skipped one a <skipped> element with the reason,
// counted in the suite's skipped attribute.
func (r Report) WriteJUnit(w io.Writer) error {
	s := junitSuite{Name: "connaudit", Tests: len(r.Results), Failures: r.Failed, Skipped: r.Skipped, Time: secs(r.Elapsed)}
	for _, res := range r.Results {
		c := junitCase{Name: res.Name, Classname: "connaudit." + string(res.Proto), Time: secs(res.Elapsed)}
		if res.Skipped != "" || res.NotConfigurable != "" {
			c.Skipped = &junitSkipped{Message: res.Skipped}
			if res.NotConfigurable != "" {
				c.Skipped.Message = "not configurable: " + res.NotConfigurable
				s.Skipped++
			}
			s.Cases = append(s.Cases, c)
			continue
		}
		var out strings.Builder
		if tl := res.Observed.Timeline; tl != nil {
			tl.WriteText(&out, true)
		}
		c.SystemOut = out.String()
		if !res.Pass {
			c.Failure = &junitFailure{Message: firstLine(strings.Join(res.Mismatches, "; ")), Text: strings.Join(res.Mismatches, "\n")}
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
