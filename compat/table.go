package main

import (
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/internal/text"
)

// width is the widest line the text output has.
const width = 100

// header says what the table is and what each row is.
const header = "Each library has two rows: defaults is its documented starting point (NewClient(), New(), " +
	"the README's first call) with its waits between attempts shortened a hundredfold and nothing else changed; " +
	"configured is the library set for each contract's policy with its own documented options, named below. " +
	"A cell is the number of requests the server saw, after ✓ (the contract held) or ✗ (broken); ∞: the call " +
	"had not ended at the audit's guard deadline; n/c: no setting for it."

// contract is one column: a contract id and the requests the server sees
// when it holds.
type contract struct {
	id       string
	requests string
}

// contractsSkip leaves out of the table the contracts held a second time
// over another fault: H1 with an RST is H1 with a FIN for a retry library
// (net/http's own replay either way), and one column per contract keeps
// the table readable.
const contractsSkip = "^retry/hidden-retry-reset$"

// contracts are the table's columns, in the catalogue's order, P1 last.
func contracts() []contract {
	scenarios, err := audit.Select(audit.Catalogue(), "^retry/", contractsSkip)
	if err != nil {
		return nil
	}
	var out []contract
	for _, s := range scenarios {
		if s.Contract != "P1" {
			out = append(out, contract{s.Contract, fmt.Sprint(s.Expect.ServerRequests)})
		}
	}
	return append(out, contract{"P1", "✓"})
}

// cell is one contract's cell in a row.
func cell(r contractResult) string {
	switch {
	case r.NotConfigurable != "":
		return "n/c"
	case r.ID == "P1" && r.Pass:
		return "✓"
	case r.ID == "P1":
		return "✗"
	case r.Unbounded:
		return "✗∞"
	case r.Pass:
		return fmt.Sprintf("✓%d", r.Requests)
	}
	return fmt.Sprintf("✗%d", r.Requests)
}

// grid returns the header and the rows of the table, cells in order.
func grid(results []clientResult) [][]string {
	cs := contracts()
	head, holds := []string{"library", "row"}, []string{"contract", ""}
	for _, c := range cs {
		head, holds = append(head, c.id), append(holds, c.requests)
	}
	out := [][]string{head, holds}
	for i, r := range results {
		name := r.Name
		if i > 0 && results[i-1].Name == r.Name {
			name = ""
		}
		line := []string{name, r.Row}
		for _, c := range cs {
			v := "-"
			for _, cr := range r.Results {
				if cr.ID == c.id {
					v = cell(cr)
				}
			}
			line = append(line, v)
		}
		out = append(out, line)
	}
	return out
}

// tableText is the table for a terminal, then the notes, within width columns.
func tableText(results []clientResult) string {
	var b strings.Builder
	for _, l := range text.Wrap(header, "", "", width) {
		fmt.Fprintln(&b, l)
	}
	fmt.Fprintln(&b)
	tw := tabwriter.NewWriter(&b, 0, 4, 1, ' ', 0)
	for _, line := range grid(results) {
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(&b)
	for _, n := range notes(results) {
		for _, l := range text.Wrap(n.text, "", "", width) {
			fmt.Fprintln(&b, l)
		}
		for _, item := range n.items {
			for _, l := range text.Wrap(item, "", "    ", width-2) {
				fmt.Fprintln(&b, "  "+l)
			}
		}
	}
	return b.String()
}

// markdown is the table and its notes as docs/retry.md shows them.
func markdown(results []clientResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", header)
	g := grid(results)
	for i, line := range g {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(line, " | "))
		if i == 0 {
			fmt.Fprintf(&b, "|%s\n", strings.Repeat("---|", len(line)))
		}
	}
	fmt.Fprintln(&b)
	for _, n := range notes(results) {
		fmt.Fprintf(&b, "- %s\n", n.text)
		for _, item := range n.items {
			fmt.Fprintf(&b, "  - %s\n", item)
		}
	}
	return b.String()
}

// note is one row's note: how the library is set, then each broken
// contract, with what was observed and, in a configured row, why.
type note struct {
	text  string
	items []string
}

func notes(results []clientResult) []note {
	var out []note
	for _, r := range results {
		n := note{text: fmt.Sprintf("%s %s, %s: %s.", r.Name, r.Version, r.Row, r.How)}
		for _, cr := range r.Results {
			if cr.Pass {
				continue
			}
			item := fmt.Sprintf("%s: %s", cr.ID, seen(cr))
			if cr.Why != "" {
				item += "; why: " + cr.Why
			}
			n.items = append(n.items, item)
		}
		out = append(out, n)
	}
	return out
}

// seen says what a broken contract observed, the same on every run: the
// attempts and requests, the outcome and the caller's error, without the
// server's port; for a call cut by the guard, only that.
func seen(cr contractResult) string {
	switch {
	case cr.NotConfigurable != "":
		return "not configurable: " + cr.NotConfigurable
	case cr.Unbounded:
		return "unbounded: the call had not ended at the audit's guard deadline"
	case cr.ID == "P1":
		return strings.Join(uniq(cr.Verdicts), "; ")
	}
	s := cr.Observed
	if cr.Error != "" && !racyWords.MatchString(cr.Error) {
		s += fmt.Sprintf(" (%s)", short(cr.Error))
	}
	if cr.Unclosed > 0 {
		s += fmt.Sprintf(" (%d of its responses never closed)", cr.Unclosed)
	}
	for _, v := range cr.Verdicts {
		if strings.HasPrefix(v, "run: ") || strings.Contains(v, "connection fate") {
			s += "; " + strings.TrimPrefix(strings.TrimPrefix(v, cr.ID+": "), "run: ")
		}
	}
	return s
}

var (
	serverURL = regexp.MustCompile(`https?://127\.0\.0\.1:[0-9]+`)
	// racyWords are net/http's words for a timeout or a cancel, which
	// differ from run to run for the same event (an http.Client Timeout
	// is "context deadline exceeded" or "net/http: request canceled"):
	// the outcome's class says it, the note leaves the error out.
	racyWords = regexp.MustCompile(`Client\.Timeout|request canceled|context deadline exceeded|context canceled`)
)

// short is an error's first line, without the server's address, at most
// 90 characters.
func short(e string) string {
	e = text.FirstLine(serverURL.ReplaceAllString(e, ""))
	if utf8.RuneCountInString(e) > 90 {
		e = string([]rune(e)[:89]) + "…"
	}
	return e
}

var (
	contractPrefix = regexp.MustCompile(`^([A-Z][0-9]+): `)
	// what differs from run to run in a leak's words
	runDetails = regexp.MustCompile(` \(request [0-9]+\)| #[0-9]+|, open for [^;]*$`)
)

// uniq states P1's verdicts once each, with the contracts after which
// they were seen: "open body: GET /fault pins connection (after A2, A3)".
func uniq(ss []string) []string {
	var order []string
	after := map[string][]string{}
	for _, s := range ss {
		s = serverURL.ReplaceAllString(text.FirstLine(s), "")
		id := "the cancel"
		if m := contractPrefix.FindStringSubmatch(s); m != nil && m[1] != "P1" {
			id = m[1]
		}
		s = runDetails.ReplaceAllString(contractPrefix.ReplaceAllString(contractPrefix.ReplaceAllString(s, ""), ""), "")
		if _, ok := after[s]; !ok {
			order = append(order, s)
		}
		if ids := after[s]; len(ids) == 0 || ids[len(ids)-1] != id {
			after[s] = append(ids, id)
		}
	}
	out := make([]string, len(order))
	for i, s := range order {
		out[i] = fmt.Sprintf("%s (after %s)", s, strings.Join(after[s], ", "))
	}
	return out
}
