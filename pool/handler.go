package pool

import (
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
)

// textWidth is the width the text page's lines of prose fit.
const textWidth = 100

func redactedURL(r *request) string { return redact.URL(r.u) }

// Snapshot is the pool's state at one instant, as served by
// [Pool.Handler] and published by [Pool.Publish].
type Snapshot struct {
	Time time.Time `json:"time"`
	// Settings are the pool's caps and bounds; nil in a Snapshot not
	// taken from a pool.
	Settings   *Settings        `json:"settings,omitempty"`
	Total      Stats            `json:"total"`
	Hosts      map[string]Stats `json:"hosts"`
	Conns      []Conn           `json:"conns"`
	OpenBodies []OpenBody       `json:"open_bodies"`
}

// Snapshot returns the pool's state.
func (p *Pool) Snapshot() Snapshot {
	if p == nil {
		return Snapshot{}
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	settings := *p.settings
	return Snapshot{Time: now, Settings: &settings, Total: p.totalsLocked(), Hosts: p.hostStatsLocked(),
		Conns: p.connsLocked(), OpenBodies: p.openBodiesLocked(now)}
}

// Handler returns an http.Handler that serves the pool's [Snapshot] as JSON,
// or as text tables when the client asks for text (Accept: text/plain, or
// ?format=text; add &v for the open bodies' stacks), or as a page of
// connection lanes with ?format=html (one self-contained page: a lane per
// connection from dial to close, its active stretches, who closed it and
// why). Mount it on a debug
// route such as /debug/connpool. A nil pool's answers 500 with the error.
func (p *Pool) Handler() http.Handler {
	if p == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, errNilPool.Error(), http.StatusInternalServerError)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := p.Snapshot()
		if r.URL.Query().Get("format") == "html" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			s.writeHTML(w)
			return
		}
		if r.URL.Query().Get("format") == "text" || (strings.Contains(r.Header.Get("Accept"), "text/plain") && !strings.Contains(r.Header.Get("Accept"), "application/json")) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			s.WriteText(w, r.URL.Query().Has("v"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		s.WriteJSON(w)
	})
}

// WriteJSON writes s as indented JSON.
func (s Snapshot) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes s as text: the pool's caps and bounds, then tables of
// the hosts and totals (with what WAITS counts), connections, open bodies
// with when each was opened and, with [CaptureStacks], where (without,
// how to learn it). Each column of durations has one unit, right-aligned:
// WAIT TIME in milliseconds, AGE in seconds, each with three decimals.
// verbose adds each open body's whole stack.
func (s Snapshot) WriteText(w io.Writer, verbose bool) error {
	if h := s.Settings.text(); h != "" {
		for _, l := range text.Wrap(h, "", "    ", textWidth) {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	hosts := make([]string, 0, len(s.Hosts))
	for h := range s.Hosts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	names := append(hosts, "total")
	rows := make([]Stats, 0, len(names))
	for _, h := range hosts {
		rows = append(rows, s.Hosts[h])
	}
	rows = append(rows, s.Total)
	waits := make([]string, len(rows))
	for i, st := range rows {
		waits[i] = millis(st.WaitDuration)
	}
	alignRight("WAIT TIME", waits)
	fmt.Fprintln(tw, "HOST\tOPEN\tACTIVE\tIDLE\tDIALING\tDIALS\tDIAL ERR\tCLOSED\tREQUESTS\tREUSED\tWAITS\tWAIT TIME\tMAX OPEN\tOPEN BODIES")
	for i, st := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", names[i], st.Open, st.Active, st.Idle, st.Dialing,
			st.Dials, st.DialErrors, st.Closed, st.Requests, st.ReusedRequests, st.WaitCount, waits[i], st.MaxOpen, st.OpenBodies)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	waitsKey := "WAITS: the requests not handed an idle connection at once: each waited for a dial (its own or " +
		"another's) or for a connection in use, at MaxConnsPerHost; database/sql's WaitCount counts only the " +
		"waits at its cap, the second kind"
	if s.Settings != nil && s.Settings.MaxConnsPerHost <= 0 {
		waitsKey = "WAITS: the requests not handed an idle connection at once: with no MaxConnsPerHost, each waited " +
			"for a dial (its own or another's) or a connection released meanwhile, never for a cap; database/sql's " +
			"WaitCount, which counts only the waits at its cap, would count none of them"
	}
	for _, l := range text.Wrap(waitsKey, "", "    ", textWidth) {
		fmt.Fprintln(tw, l)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CONN\tHOST\tPROTO\tTLS\tSTATE\tREQUESTS\tREAD\tWRITTEN\tCLOSED BY\tREASON")
	for _, c := range s.Conns {
		reason := string(c.CloseReason)
		if c.CloseDetail != "" {
			reason += " (" + c.CloseDetail + ")"
		}
		fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", c.ID, c.Host, c.Proto, c.TLSVersion, c.State, c.Requests,
			c.BytesRead, c.BytesWritten, c.ClosedBy, reason)
	}
	noSite := false
	if len(s.OpenBodies) > 0 {
		fmt.Fprintln(tw)
		ages := make([]string, len(s.OpenBodies))
		for i, b := range s.OpenBodies {
			ages[i] = fmt.Sprintf("%.3fs", b.Age.Seconds())
		}
		alignRight("AGE", ages)
		fmt.Fprintln(tw, "OPEN BODY\tMETHOD\tURL\tCONN\tOPENED AT\tAGE\tSITE")
		for i, b := range s.OpenBodies {
			site := b.Site()
			if b.Collected {
				site = strings.TrimSpace(site + " (garbage collected unclosed)")
			}
			if site == "" {
				site, noSite = "-", true
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t#%d\t%s\t%s\t%s\n", b.Timeline, b.Method, redact.Printable(b.URL), b.Conn,
				b.OpenedAt.Format("15:04:05.000"), ages[i], redact.Printable(site))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if noSite {
		for _, l := range text.Wrap("SITE -: pool.CaptureStacks() records where each request is made, at the cost "+
			"of a stack walk per request", "", "    ", textWidth) {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
	}
	if verbose {
		for _, b := range s.OpenBodies {
			if b.Stack == "" {
				continue
			}
			if _, err := fmt.Fprintf(w, "\nopen body %d (%s %s) opened at:\n%s", b.Timeline, b.Method,
				redact.Printable(b.URL), indent(printableLines(b.Stack))+"\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

// millis writes d in milliseconds with three decimals, whatever its size.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

// alignRight pads cells on the left to one width, that of the widest cell
// or of header if wider, so that the column they fill is right-aligned.
func alignRight(header string, cells []string) {
	width := len(header)
	for _, c := range cells {
		width = max(width, len(c))
	}
	for i, c := range cells {
		cells[i] = fmt.Sprintf("%*s", width, c)
	}
}

// Publish publishes the pool's [Snapshot] through expvar under name. A name
// already published is an error.
func (p *Pool) Publish(name string) error {
	if p == nil {
		return errNilPool
	}
	if name == "" {
		return errors.New("pool: empty expvar name")
	}
	publishing.Lock()
	defer publishing.Unlock()
	if expvar.Get(name) != nil {
		return fmt.Errorf("pool: expvar %q already published", name)
	}
	expvar.Publish(name, expvar.Func(func() any { return p.Snapshot() }))
	return nil
}

// publishing serializes Publish: expvar.Publish panics on a name already
// published, which two calls could both find free.
var publishing sync.Mutex

// printableLines is [redact.Printable] line by line: s keeps its line
// breaks, and no line can drive a terminal.
func printableLines(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(redact.Printable(strings.TrimSuffix(line, "\n")))
		b.WriteByte('\n')
	}
	return b.String()
}
