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

	"github.com/connaudit/connaudit/httptrace"
)

func redactedURL(r *request) string { return httptrace.RedactURL(&r.u) }

// Snapshot is the pool's state at one instant, as served by
// [Pool.Handler] and published by [Pool.Publish].
type Snapshot struct {
	Time       time.Time        `json:"time"`
	Total      Stats            `json:"total"`
	Hosts      map[string]Stats `json:"hosts"`
	Conns      []Conn           `json:"conns"`
	OpenBodies []OpenBody       `json:"open_bodies"`
}

// Snapshot returns the pool's state.
func (p *Pool) Snapshot() Snapshot {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return Snapshot{Time: now, Total: p.total.stats(), Hosts: p.hostStatsLocked(), Conns: p.connsLocked(),
		OpenBodies: p.openBodiesLocked(now)}
}

// Handler returns an http.Handler that serves the pool's [Snapshot] as JSON,
// or as a text table when the client asks for text (Accept: text/plain, or
// ?format=text). Mount it on a debug route such as /debug/connpool.
func (p *Pool) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := p.Snapshot()
		if r.URL.Query().Get("format") == "text" || (strings.Contains(r.Header.Get("Accept"), "text/plain") && !strings.Contains(r.Header.Get("Accept"), "application/json")) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			WriteText(w, s)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s)
	})
}

// WriteText writes s as text tables: totals, hosts, connections, open
// bodies. Each column of durations has one unit, right-aligned: WAIT TIME
// in milliseconds, AGE in seconds, each with three decimals.
func WriteText(w io.Writer, s Snapshot) error {
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
	if len(s.OpenBodies) > 0 {
		fmt.Fprintln(tw)
		ages := make([]string, len(s.OpenBodies))
		for i, b := range s.OpenBodies {
			ages[i] = fmt.Sprintf("%.3fs", b.Age.Seconds())
		}
		alignRight("AGE", ages)
		fmt.Fprintln(tw, "OPEN BODY\tMETHOD\tURL\tCONN\tAGE")
		for i, b := range s.OpenBodies {
			fmt.Fprintf(tw, "%d\t%s\t%s\t#%d\t%s\n", b.Timeline, b.Method, b.URL, b.Conn, ages[i])
		}
	}
	return tw.Flush()
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
