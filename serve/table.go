package serve

import (
	"fmt"
	"strings"
)

// Table returns the verdicts of sessions as a Markdown table, a row per
// scenario and a column per client: the caller's outcome in the audit's
// vocabulary, attempts/requests when they are not 1/1, "✗" before a
// failure, "n/c" for not configurable, "-" for a scenario not offered (a
// protocol the client does not speak). Its last row says whether the
// client left connections open after done.
func Table(sessions []*SessionReport) string {
	var names []string
	seen := map[string]bool{}
	for _, s := range sessions {
		for _, r := range s.Results {
			if !seen[r.Name] {
				seen[r.Name] = true
				names = append(names, r.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, s := range sessions {
		v, _, _ := strings.Cut(s.Client.Version, " (")
		fmt.Fprintf(&b, " %s %s |", s.Client.Name, v)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(sessions)) + "\n")
	for _, n := range names {
		label := n
		for _, s := range sessions {
			for _, r := range s.Results {
				if r.Name == n && r.Contract != "" {
					label = r.Contract + " " + n
				}
			}
		}
		fmt.Fprintf(&b, "| %s |", label)
		for _, s := range sessions {
			c := "-"
			for _, r := range s.Results {
				if r.Name == n {
					c = cellOf(r)
				}
			}
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteString("\n")
	}
	// Whether any, not how many: how many a client's idle timer has not
	// closed yet (fetch's 4 s) depends on how long the last scenarios took.
	b.WriteString("| open after done |")
	for _, s := range sessions {
		c := "none"
		if s.OpenAtDone > 0 {
			c = "some"
		}
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString("\n")
	return b.String()
}

func cellOf(r Result) string {
	switch {
	case r.NotConfigurable != "":
		return "n/c"
	case r.Skipped != "":
		return "skip"
	case r.NotReported:
		return "✗ not reported"
	}
	c := outcomeText(r)
	sent := "?"
	if r.Attempts != nil {
		sent = fmt.Sprint(*r.Attempts)
	}
	if (r.Attempts != nil && *r.Attempts != 1) || r.Server.Requests != 1 {
		c += fmt.Sprintf(" %s/%d", sent, r.Server.Requests)
	}
	if r.HiddenRetry {
		c += " hidden"
	}
	if !r.Pass {
		c = "✗ " + c
	}
	return c
}
