package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/connaudit/connaudit/audit"
)

// contractRows returns, for each contract id in order, the contract's own
// cell: what a client that holds it shows.
func contractRows() []row {
	scenarios, err := audit.Select(audit.Catalogue(), "^retry/", "")
	if err != nil {
		return nil
	}
	var rows []row
	for _, s := range scenarios {
		rows = append(rows, row{id: s.Contract, contract: expected(s.Expect)})
	}
	return append(rows, row{id: "P1", contract: "all recovered"})
}

type row struct{ id, contract string }

// expected is the cell of a client that holds the contract e.
func expected(e audit.Expect) string {
	s := fmt.Sprintf("%d/%d", e.ClientAttempts, e.ServerRequests)
	if e.Writes != nil {
		s += fmt.Sprintf(" w%d", *e.Writes)
	}
	if e.HiddenRetry {
		s += " hidden"
	}
	switch {
	case e.Class == "ok":
		return fmt.Sprintf("%s %d", s, e.Status)
	case e.Class == "response-header-timeout":
		return s + " header-timeout"
	}
	return s + " " + string(e.Class)
}

func cell(r contractResult) string {
	switch {
	case r.NotConfigurable != "":
		return "n/c"
	case r.Pass:
		return r.Observed
	}
	return "✗ " + r.Observed
}

// grid returns the header and the rows of the table, cells in order.
func grid(results []clientResult) [][]string {
	head := []string{"contract", "holds"}
	for _, c := range results {
		head = append(head, c.Name+" "+c.Version)
	}
	out := [][]string{head}
	for _, r := range contractRows() {
		line := []string{r.id, r.contract}
		for _, c := range results {
			v := "-"
			for _, cr := range c.Results {
				if cr.ID == r.id {
					v = cell(cr)
				}
			}
			line = append(line, v)
		}
		out = append(out, line)
	}
	return out
}

// text is the table for a terminal, then every broken contract's verdicts.
func text(results []clientResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	g := grid(results)
	head := g[0]
	names, versions := []string{head[0], head[1]}, []string{"", ""}
	for _, c := range results {
		names, versions = append(names, c.Name), append(versions, c.Version)
	}
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	fmt.Fprintln(tw, strings.Join(versions, "\t"))
	for _, line := range g[1:] {
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	for _, c := range results {
		for _, r := range c.Results {
			if r.NotConfigurable != "" {
				fmt.Fprintf(&b, "%s, %s: not configurable: %s\n", c.Name, r.ID, r.NotConfigurable)
			}
			for _, v := range r.Verdicts {
				fmt.Fprintf(&b, "%s: %s\n", c.Name, firstLine(v))
			}
		}
	}
	return b.String()
}

// markdown is the table as docs/retry.md shows it.
func markdown(results []clientResult) string {
	var b strings.Builder
	g := grid(results)
	for i, line := range g {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(line, " | "))
		if i == 0 {
			fmt.Fprintf(&b, "|%s\n", strings.Repeat("---|", len(line)))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
