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
// bodies.
func WriteText(w io.Writer, s Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tOPEN\tACTIVE\tIDLE\tDIALING\tDIALS\tDIAL ERR\tCLOSED\tREQUESTS\tREUSED\tWAITS\tWAIT TIME\tMAX OPEN\tOPEN BODIES")
	row := func(name string, st Stats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", name, st.Open, st.Active, st.Idle, st.Dialing,
			st.Dials, st.DialErrors, st.Closed, st.Requests, st.ReusedRequests, st.WaitCount, st.WaitDuration.Round(time.Microsecond), st.MaxOpen, st.OpenBodies)
	}
	hosts := make([]string, 0, len(s.Hosts))
	for h := range s.Hosts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		row(h, s.Hosts[h])
	}
	row("total", s.Total)
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
		fmt.Fprintln(tw, "OPEN BODY\tMETHOD\tURL\tCONN\tAGE")
		for _, b := range s.OpenBodies {
			fmt.Fprintf(tw, "%d\t%s\t%s\t#%d\t%s\n", b.Timeline, b.Method, b.URL, b.Conn, b.Age.Round(time.Millisecond))
		}
	}
	return tw.Flush()
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
