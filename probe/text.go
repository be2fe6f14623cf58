package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
)

// writable returns the error of writing r to w: r or w nil.
func (r *Result) writable(w io.Writer) error {
	switch {
	case r == nil:
		return errors.New("probe: nil *Result")
	case w == nil:
		return errors.New("probe: nil writer")
	}
	return nil
}

// WriteJSON writes r in its stable JSON form (see the package
// documentation), indented.
func (r *Result) WriteJSON(w io.Writer) error {
	if err := r.writable(w); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a reader: the requests and their outcomes, dials
// against the ideal, the connections grouped by fate, the stage
// percentiles, discovery, and the findings, most severe first, each led
// by its severity in capitals ("WARN") and wrapped to 100 columns, its
// later lines indented under its text. With verbose, each kept
// timeline's waterfall ([KeepTimelines]) comes before the summary.
func (r *Result) WriteText(w io.Writer, verbose bool) error {
	if err := r.writable(w); err != nil {
		return err
	}
	var b strings.Builder
	if verbose {
		for _, tl := range r.Timelines {
			if err := tl.WriteText(&b, true); err != nil {
				return err
			}
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "probe %s %s\n", r.Method, r.Target)
	capText := "uncapped"
	if r.MaxConnsPerHost > 0 {
		capText = fmt.Sprintf("capped at %d", r.MaxConnsPerHost)
	}
	if r.Duration > 0 {
		fmt.Fprintf(&b, "  requests for %s (at most %d), concurrency %d, connections %s", human(r.Duration), r.Requested, r.Concurrency, capText)
	} else {
		fmt.Fprintf(&b, "  %d requests, concurrency %d, connections %s", r.Requested, r.Concurrency, capText)
	}
	if r.Gap > 0 {
		fmt.Fprintf(&b, ", gap %s", human(r.Gap))
	}
	fmt.Fprintf(&b, ", timeout %s", human(r.Timeout))
	if r.Deadline > 0 {
		fmt.Fprintf(&b, ", deadline %s", human(r.Deadline))
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	sent := fmt.Sprintf("%d", r.Requests)
	if r.Requests != r.Requested && (r.Duration == 0 || r.DeadlineReached || r.Interrupted) {
		sent = fmt.Sprintf("%d of %d", r.Requests, r.Requested)
	}
	perSecond := ""
	if r.RequestsPerSecond > 0 {
		perSecond = fmt.Sprintf(" (%s/s)", rate(r.RequestsPerSecond))
	}
	fmt.Fprintf(tw, "requests\t%s in %s%s: %s\n", sent, human(r.MainElapsed), perSecond, outcomeText(r))
	for _, f := range r.Failures {
		fmt.Fprintf(tw, "  failed\t%s @%s ×%d: %s\n", f.Class, f.Stage, f.Count, f.Error)
	}
	if r.HiddenRetries > 0 {
		fmt.Fprintf(tw, "hidden retries\t%d request(s), %d extra attempt(s)", r.HiddenRetries, r.ExtraAttempts)
		if r.HiddenRetriesPossiblyProcessed+r.HiddenRetriesNotProcessed > 0 {
			fmt.Fprintf(tw, ": %d possibly processed twice, %d not processed the first time",
				r.HiddenRetriesPossiblyProcessed, r.HiddenRetriesNotProcessed)
		}
		if len(r.HiddenRetriesWhy) > 0 {
			fmt.Fprintf(tw, " (%s)", whyList(r.HiddenRetriesWhy))
		}
		tw.Write([]byte("\n"))
	}
	dials := fmt.Sprintf("%d", r.Dials)
	var dialNotes []string
	if r.DialErrors > 0 {
		dialNotes = append(dialNotes, fmt.Sprintf("%d failed", r.DialErrors))
	}
	if r.DialsAbandoned > 0 {
		dialNotes = append(dialNotes, fmt.Sprintf("%d abandoned", r.DialsAbandoned))
	}
	if len(dialNotes) > 0 {
		dials += " (" + strings.Join(dialNotes, ", ") + ")"
	}
	fmt.Fprintf(tw, "dials\t%s; would be %d with perfect keep-alive\n", dials, r.PerfectDials)
	if r.PerConn.Max > 0 {
		fmt.Fprintf(tw, "per connection\t%.1f requests (min %d, max %d)\n", r.PerConn.Mean, r.PerConn.Min, r.PerConn.Max)
	}
	if len(r.Protocols) > 0 {
		fmt.Fprintf(tw, "protocol\t%s\n", countList(r.Protocols))
	}
	if k := &r.KeepAlive; k.Responses > 0 {
		fmt.Fprintf(tw, "server says\tKeep-Alive: %s (on %d response(s))\n", k.Header, k.Responses)
	}
	if t := r.TLS; t != nil {
		fmt.Fprintf(tw, "tls\t%s; ALPN %s; resumed %d of %d connection(s) that could\n", countList(t.Versions), orNone(t.ALPN), t.Resumed, t.Resumable)
	}
	tw.Flush()

	b.WriteString("\nconnections\n")
	writeConnGroups(&b, r.Connections)
	if r.ConnectionsOmitted > 0 {
		fmt.Fprintf(&b, "  (%d more not listed)\n", r.ConnectionsOmitted)
	}
	if len(r.ClosedBy) > 0 {
		reasons := slices.Sorted(maps.Keys(r.ClosedBy))
		parts := make([]string, 0, len(reasons))
		for _, k := range reasons {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, r.ClosedBy[k]))
		}
		fmt.Fprintf(&b, "  closes: %s\n", strings.Join(parts, ", "))
	}

	if r.Stages.New.Count+r.Stages.Reused.Count > 0 {
		b.WriteString("\nstages of successful requests\n")
		writeStages(&b, r)
	}

	if d := r.Discovery; d != nil {
		fmt.Fprintf(&b, "\ndiscovery (%d requests, %d dials, apart from the above; the whole probe took %s)\n", d.Requests, d.Dials, human(r.Elapsed))
		if m := d.MaxRequests; m != nil {
			fmt.Fprintf(&b, "  max requests per connection: %s\n", maxRequestsText(m))
		}
		if i := d.IdleTimeout; i != nil {
			fmt.Fprintf(&b, "  idle timeout: %s\n", idleText(i))
		}
	}

	b.WriteString("\nfindings\n")
	if len(r.Findings) == 0 {
		b.WriteString("  none\n")
	}
	for _, f := range r.Findings {
		// The severity word in capitals, padded to five columns; the
		// finding wrapped under its text.
		label := strings.ToUpper(string(f.Severity))
		pad := strings.Repeat(" ", max(0, 5-len(f.Severity)))
		for _, l := range text.Wrap(f.ID+": "+f.Message, "  "+label+pad+" ", findingIndent, textWidth) {
			b.WriteString(l + "\n")
		}
	}
	if r.DeadlineReached {
		b.WriteString("\n(the deadline stopped the probe: the numbers above cover part of it)\n")
	}
	if r.Interrupted {
		b.WriteString("\n(interrupted: the numbers above cover part of the probe)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// textWidth is the width the findings are wrapped to; findingIndent
// begins each line of a finding after its first, under its text.
const (
	textWidth     = 100
	findingIndent = "        "
)

func outcomeText(r *Result) string {
	if len(r.Outcomes) == 0 {
		return "none"
	}
	classes := slices.Sorted(maps.Keys(r.Outcomes))
	// ok first, then failures by name.
	slices.SortStableFunc(classes, func(a, b httptrace.Class) int {
		switch {
		case a == vocab.ClassOK:
			return -1
		case b == vocab.ClassOK:
			return 1
		}
		return 0
	})
	parts := make([]string, 0, len(classes))
	for _, c := range classes {
		s := fmt.Sprintf("%s %d", c, r.Outcomes[c])
		if c == vocab.ClassOK && len(r.Statuses) > 0 {
			codes := slices.Sorted(maps.Keys(r.Statuses))
			var cs []string
			for _, code := range codes {
				cs = append(cs, fmt.Sprintf("%d ×%d", code, r.Statuses[code]))
			}
			s += " (" + strings.Join(cs, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func countList(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// connGroup is a set of connections with the same fate.
type connGroup struct {
	key string
	ids []uint64
}

func fateOf(c Connection) string {
	if c.DialError != "" {
		return "dial failed: " + c.DialError
	}
	if c.DialAbandoned {
		return "dial abandoned: the Transport cancelled it (or its TLS handshake) once no request needed it"
	}
	var b strings.Builder
	proto := c.Proto
	if proto == "" {
		proto = "-"
	}
	b.WriteString(proto)
	if c.TLSVersion != "" {
		b.WriteString(", " + c.TLSVersion)
		if c.TLSResumed {
			b.WriteString(" resumed")
		}
	}
	fmt.Fprintf(&b, ", %d request(s)", c.Responses)
	if n := c.Requests - c.Responses; n > 0 {
		fmt.Fprintf(&b, " + %d unanswered", n)
	}
	b.WriteString(", ")
	switch {
	case c.ClosedBy == "":
		b.WriteString("still open")
	case c.ClosedBy == vocab.ClosedByClient && c.CloseReason == vocab.ReasonCloseIdle:
		b.WriteString("closed by the probe at the end")
	default:
		fmt.Fprintf(&b, "closed by %s: %s", c.ClosedBy, c.CloseReason)
		if c.CloseDetail != "" {
			fmt.Fprintf(&b, " (%s)", c.CloseDetail)
		}
		if c.CloseStatus >= 400 {
			fmt.Fprintf(&b, " on a %d response", c.CloseStatus)
		}
	}
	return b.String()
}

func writeConnGroups(b *strings.Builder, conns []Connection) {
	if len(conns) == 0 {
		b.WriteString("  none\n")
		return
	}
	var groups []*connGroup
	byKey := map[string]*connGroup{}
	for _, c := range conns {
		k := fateOf(c)
		g := byKey[k]
		if g == nil {
			g = &connGroup{key: k}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, c.ID)
	}
	// The ids column is as wide as its widest list, at least idListMin:
	// idList bounds each list, and the fates line up whatever their ids.
	labels := make([]string, len(groups))
	width := idListMin
	for i, g := range groups {
		labels[i] = idList(g.ids)
		width = max(width, utf8.RuneCountInString(labels[i]))
	}
	for i, g := range groups {
		fmt.Fprintf(b, "  %-*s %s\n", width, labels[i], g.key)
	}
}

const (
	// idListRuns bounds the runs of ids [idList] writes.
	idListRuns = 4
	// idListWidth bounds the characters [idList] writes, when the first
	// id and the count fit in it (ids below 10^9 in lists shorter than
	// 10^8 always do).
	idListWidth = 24
	// idListMin is the least width of the connections table's ids column.
	idListMin = 14
)

// idList says a list of connection ids, in ascending order, briefly: runs
// of consecutive ids as ranges, and the count when they are not one run:
// "#1", "#1-#4", "#1,#3 (2)", "#1-#3,#7 (4)". Past idListRuns runs, or
// past idListWidth characters, it writes as many of the first runs as fit,
// "…" and the count of all: "#1,#3,#5,#7,… (6)", "#1001-#1002,… (40)"; when
// not even the first run fits, the first id alone: "#100000000,… (2000)". The
// report's JSON keeps every connection.
func idList(ids []uint64) string {
	var runs []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		r := fmt.Sprintf("#%d", ids[i])
		if j > i {
			r += fmt.Sprintf("-#%d", ids[j])
		}
		runs = append(runs, r)
		i = j + 1
	}
	if len(runs) == 0 {
		return ""
	}
	count := fmt.Sprintf(" (%d)", len(ids))
	fits := func(s string) bool { return utf8.RuneCountInString(s) <= idListWidth }
	if len(runs) <= idListRuns {
		all := strings.Join(runs, ",")
		if len(runs) > 1 {
			all += count
		}
		if fits(all) {
			return all
		}
	}
	for k := min(len(runs)-1, idListRuns); k >= 1; k-- {
		if s := strings.Join(runs[:k], ",") + ",…" + count; fits(s) {
			return s
		}
	}
	if len(ids) == 1 {
		return runs[0]
	}
	return fmt.Sprintf("#%d,…%s", ids[0], count)
}

func writeStages(b *strings.Builder, r *Result) {
	s := &r.Stages
	rows := []struct {
		name string
		n, r Percentiles
	}{
		{"dns", s.New.DNS, s.Reused.DNS},
		{"connect", s.New.Connect, s.Reused.Connect},
		{"tls", s.New.TLS, s.Reused.TLS},
		{"pool wait", s.New.PoolWait, s.Reused.PoolWait},
		{"write", s.New.Write, s.Reused.Write},
		{"server", s.New.Server, s.Reused.Server},
		{"transfer", s.New.Transfer, s.Reused.Transfer},
		{"total", s.New.Total, s.Reused.Total},
	}
	// Each cell is right-aligned in a column 10 wide, or 2 wider than the
	// widest cell: times of seconds or more keep the columns apart.
	cells := make([][]string, len(rows))
	col := 10
	for i, row := range rows {
		for _, g := range []struct {
			p     Percentiles
			count int
		}{{row.n, s.New.Count}, {row.r, s.Reused.Count}} {
			for _, d := range []time.Duration{g.p.P50, g.p.P90, g.p.P99, g.p.Max} {
				cell := "-"
				if g.count > 0 {
					cell = ms(d)
				}
				cells[i] = append(cells[i], cell)
				col = max(col, len(cell)+2)
			}
		}
	}
	fmt.Fprintf(b, "  %-10s  %-*s  %s\n", "", 4*col, fmt.Sprintf("new connection (%d)", s.New.Count), fmt.Sprintf("reused connection (%d)", s.Reused.Count))
	fmt.Fprintf(b, "  %-10s", "")
	for range 2 {
		b.WriteString("  ")
		for _, h := range []string{"p50", "p90", "p99", "max"} {
			fmt.Fprintf(b, "%*s", col, h)
		}
	}
	b.WriteByte('\n')
	for i, row := range rows {
		fmt.Fprintf(b, "  %-10s", row.name)
		for j, cell := range cells[i] {
			if j%4 == 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(b, "%*s", col, cell)
		}
		b.WriteByte('\n')
	}
	if s.ReuseSaves != nil {
		fmt.Fprintf(b, "  reuse saves %s per request (median of dns, connect and tls on a new connection)\n", ms(*s.ReuseSaves))
	}
}

// rate writes a number of requests per second for reading.
func rate(perSecond float64) string {
	if perSecond >= 100 {
		return fmt.Sprintf("%.0f", perSecond)
	}
	return fmt.Sprintf("%.1f", perSecond)
}

// ms writes d in milliseconds with three decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

func maxRequestsText(m *MaxRequestsResult) string {
	var s string
	switch {
	case m.Found:
		s = fmt.Sprintf("%d (%s)", m.Limit, howText(m.How))
		if m.HiddenRetry {
			s += "; the Transport retried the next request by itself"
		}
		if m.ErrorResponses > 0 {
			s += fmt.Sprintf("; measured on responses of which %d were errors", m.ErrorResponses)
		}
	case m.Error != "":
		s = "unknown: " + m.Error
	default:
		s = fmt.Sprintf("none up to %d", m.Bound)
	}
	return s + fmt.Sprintf(" [%d requests]", m.Requests)
}

func idleText(i *IdleTimeoutResult) string {
	var s string
	switch {
	case i.Found:
		s = bracket(i.Survived, i.Closed)
		if !i.Complete {
			s += " (search stopped early: " + i.Error + ")"
		}
	case i.Error != "":
		s = "unknown: " + i.Error
		if i.Survived > 0 {
			s += fmt.Sprintf("; survived %s", human(i.Survived))
		}
	default:
		s = fmt.Sprintf("none up to %s (the connection survived every gap)", human(i.Max))
	}
	return s + fmt.Sprintf(" [%d trials, %d requests]", i.Trials, i.Requests)
}
