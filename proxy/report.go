package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/junit"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/pool"
)

// Schema names the report's JSON format.
const schema = "connaudit.proxy/v1"

// Report is what a proxy saw: each client's connections and requests,
// the upstream pool's, the replays and the verdicts.
type Report struct {
	Schema   string         `json:"schema"`
	Listen   string         `json:"listen"`
	Upstream string         `json:"upstream"` // query values redacted
	Elapsed  time.Duration  `json:"elapsed_ns"`
	Faults   []string       `json:"faults,omitempty"`
	Seed     uint64         `json:"seed"`
	Clients  []Client       `json:"clients"`
	Pool     UpstreamReport `json:"upstream_pool"`
	Replays  []Replay       `json:"replays,omitempty"`
	Verdicts []Verdict      `json:"verdicts"`
}

// Client is one client's connections and requests.
type Client struct {
	Name     string         `json:"name"`
	Conns    int            `json:"conns"` // closed and open
	Open     int            `json:"open"`
	Requests int            `json:"requests"`
	Reused   int            `json:"reused"`      // requests on a connection that served one before
	MaxIdle  time.Duration  `json:"max_idle_ns"` // its connections' longest idle gap (Conn.MaxIdle)
	Closes   map[string]int `json:"closes"`      // "closed-by: reason" → connections
	Statuses map[int]int    `json:"statuses"`
	// Faults are the faults the rules injected on its connections: a
	// request rule's, and a connection rule's (idle-close, go-dark), as
	// Conn.Faults lists them and the live line counts them.
	Faults  int    `json:"faults"`
	Retries int    `json:"retries"` // requests sent again after a 5xx
	List    []Conn `json:"list"`    // the first 256 closed, and the open
	// Answered are the responses the proxy made in place of the
	// upstream's, its round trip failed: "502 ERROR" (the upstream's
	// error, redacted) → requests.
	Answered map[string]int `json:"proxy_answered,omitempty"`
	reqIdle  time.Duration  // the longest idle gap a request followed
}

// UpstreamReport is the proxy's upstream pool, as package pool tracks it.
type UpstreamReport struct {
	Conns    int            `json:"conns"` // dials that opened a connection
	Requests int            `json:"requests"`
	Reused   int            `json:"reused"`
	Closes   map[string]int `json:"closes"`
	List     []UpstreamConn `json:"list"`
	// IdleTimeout is the upstream's keep-alive idle timeout, as stated
	// (UpstreamIdle) or measured: the shortest idle it closed one after.
	IdleTimeout time.Duration `json:"idle_timeout_ns,omitempty"`
	IdleSource  string        `json:"idle_timeout_source,omitempty"` // "stated", "measured"
}

// UpstreamConn is one of the upstream pool's connections.
type UpstreamConn struct {
	ID       uint64 `json:"id"`
	Proto    string `json:"proto,omitempty"`
	Requests int    `json:"requests"`
	Open     bool   `json:"open,omitempty"`
	ClosedBy string `json:"closed_by,omitempty"`
	Reason   string `json:"close_reason,omitempty"`
	// Dialed is when its dial began, FirstUsed when a request first had
	// it, Closed when it closed (zero: open).
	Dialed    time.Time `json:"dialed,omitzero"`
	FirstUsed time.Time `json:"first_used,omitzero"`
	Closed    time.Time `json:"closed,omitzero"`
}

// Replay is a request one client sent again within the window after the
// first got no response: Class says what it was, "hidden-retry", or
// "write-committed-twice" (not idempotent, no Idempotency-Key, and the
// upstream processed both).
type Replay struct {
	Client string  `json:"client"`
	Class  string  `json:"class"`
	First  Attempt `json:"first"`
	Again  Attempt `json:"again"`
}

const (
	classHiddenRetry = "hidden-retry"
	classWriteTwice  = "write-committed-twice"
)

// Verdict is one judgement of one client: Result is "pass", "fail",
// "finding" (said, failing nothing: Class names it, as serve's findings
// are named, and Detail says it) or "skipped" (not judged; Detail says
// why).
type Verdict struct {
	Name   string `json:"name"`
	Client string `json:"client"`
	Result string `json:"result"`
	Class  string `json:"class,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Failed says whether a verdict failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Verdicts, func(v Verdict) bool { return v.Result == resultFail })
}

// Report returns what the proxy saw so far; after [Proxy.Close], all.
func (p *Proxy) Report() *Report {
	rep := &Report{Schema: schema, Listen: p.URL(), Upstream: redact.URL(p.upstream),
		Elapsed: time.Since(p.start), Seed: p.cfg.seed}
	for _, r := range p.cfg.rules {
		rep.Faults = append(rep.Faults, r.String())
	}
	p.mu.Lock()
	open := make([]*connRec, 0, len(p.conns))
	for _, r := range p.conns {
		open = append(open, r)
	}
	p.mu.Unlock()
	openConns := map[string][]Conn{}
	for _, r := range open {
		c := r.snapshot()
		openConns[c.Client] = append(openConns[c.Client], c)
	}
	p.mu.Lock()
	for name := range openConns {
		p.clientLocked(name)
	}
	for _, name := range p.order {
		c := p.clients[name]
		cl := Client{Name: name, Conns: c.nConns + len(openConns[name]), Open: len(openConns[name]),
			Requests: c.requests, Reused: c.reused, MaxIdle: c.maxIdle, Closes: maps(c.closes),
			Statuses: mapsInt(c.statuses), Faults: c.faults, Retries: c.retries, reqIdle: c.reqIdle}
		if len(c.answered) > 0 {
			cl.Answered = maps(c.answered)
		}
		cl.List = append(append(cl.List, c.conns...), openConns[name]...)
		for _, oc := range openConns[name] {
			cl.MaxIdle = max(cl.MaxIdle, oc.MaxIdle)
			cl.reqIdle = max(cl.reqIdle, oc.reqIdle)
			cl.Faults += len(oc.Faults)
		}
		sort.Slice(cl.List, func(i, j int) bool { return cl.List[i].ID < cl.List[j].ID })
		rep.Clients = append(rep.Clients, cl)
	}
	rep.Replays = append(rep.Replays, p.replays...)
	cut := append([]Attempt(nil), p.cut...)
	p.mu.Unlock()
	rep.Pool = p.upstreamReport()
	rep.Verdicts = p.judge(rep, cut)
	return rep
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapsInt(m map[int]int) map[int]int {
	out := make(map[int]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// upstreamReport reads the upstream pool.
func (p *Proxy) upstreamReport() UpstreamReport {
	u := UpstreamReport{Closes: map[string]int{}}
	var measured time.Duration
	for _, c := range p.up.Conns() {
		if c.State == pool.StateFailed || (c.Requests == 0 && c.State == pool.StateClosed) {
			continue
		}
		uc := UpstreamConn{ID: c.ID, Proto: c.Proto, Requests: c.Requests, Open: c.State != pool.StateClosed,
			ClosedBy: string(c.ClosedBy), Reason: string(c.CloseReason), Dialed: c.DialedAt, FirstUsed: c.FirstUsedAt,
			Closed: c.ClosedAt}
		if c.ClosedBy == pool.ClosedByClient {
			// The upstream pool's client is the proxy's own transport.
			uc.ClosedBy = closedByProxy
		}
		u.Conns++
		u.Requests += c.Requests
		u.Reused += max(c.Requests-1, 0)
		if !uc.Open {
			u.Closes[uc.ClosedBy+": "+uc.Reason]++
		}
		if c.CloseReason == pool.ReasonServerClosedIdle {
			if idle := idleBeforeClose(c); idle > 0 && (measured == 0 || idle < measured) {
				measured = idle
			}
		}
		u.List = append(u.List, uc)
	}
	switch {
	case p.cfg.upstreamIdle > 0:
		u.IdleTimeout, u.IdleSource = p.cfg.upstreamIdle, "stated"
	case measured > 0:
		u.IdleTimeout, u.IdleSource = measured, "measured"
	}
	return u
}

// maxHistory is the length at which package pool stops recording a
// connection's states: past it, the last idle recorded is not the last.
const maxHistory = 256

// idleBeforeClose is how long c was idle when the server closed it; 0 when
// not known: its history is full (about 128 requests), its last idle
// period not in it.
func idleBeforeClose(c pool.Conn) time.Duration {
	if len(c.History) >= maxHistory {
		return 0
	}
	for i := len(c.History) - 1; i >= 0; i-- {
		if c.History[i].State == pool.StateIdle {
			return c.ClosedAt.Sub(c.History[i].At)
		}
	}
	return 0
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJUnit writes the verdicts as JUnit XML: a suite per client, a case
// per verdict.
func (r *Report) WriteJUnit(w io.Writer) error {
	var s junit.Suites
	// The run's time is each client's suite's; a verdict, judged at
	// its end, takes none.
	elapsed := fmt.Sprintf("%.3f", r.Elapsed.Seconds())
	byClient := map[string]*junit.Suite{}
	var order []string
	for _, v := range r.Verdicts {
		su := byClient[v.Client]
		if su == nil {
			su = &junit.Suite{Name: "connaudit proxy " + v.Client, Time: elapsed}
			byClient[v.Client] = su
			order = append(order, v.Client)
		}
		c := junit.Case{Name: v.Name, Classname: "proxy." + v.Client, Time: "0.000"}
		switch v.Result {
		case resultFinding:
			c.SystemOut = "finding (" + v.Class + "): " + v.Detail + "\n"
		case resultFail:
			c.Failure = &junit.Failure{Message: v.Detail, Text: v.Detail}
			su.Failures++
		case resultSkipped:
			c.Skipped = &junit.Skipped{Message: v.Detail}
			su.Skipped++
		}
		su.Tests++
		su.Cases = append(su.Cases, c)
	}
	for _, name := range order {
		s.Suites = append(s.Suites, *byClient[name])
	}
	return junit.Write(w, s)
}

// WriteText writes the report for a terminal, within 100 columns.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "connaudit proxy %s → %s, %s\n", r.Listen, r.Upstream, r.Elapsed.Round(time.Millisecond))
	if len(r.Faults) > 0 {
		fmt.Fprintf(&b, "  faults: %s (seed %d)\n", strings.Join(r.Faults, "; "), r.Seed)
	}
	b.WriteString("\nclients\n")
	if len(r.Clients) == 0 {
		b.WriteString("  none\n")
	}
	for _, c := range r.Clients {
		fmt.Fprintf(&b, "  %-15s %s (%d open), %s (%d reused, %s), max idle %s, %s\n",
			c.Name, text.Plural(c.Conns, "conn"), c.Open, text.Plural(c.Requests, "request"), c.Reused,
			perConn(c.Requests, c.Conns), c.MaxIdle.Round(time.Millisecond), text.Plural(c.Faults, "fault"))
		for _, k := range sortedKeys(c.Closes) {
			fmt.Fprintf(&b, "    closed by %s ×%d\n", k, c.Closes[k])
		}
		for _, k := range sortedKeys(c.Answered) {
			b.WriteString(text.Cut(fmt.Sprintf("    answered by the proxy ×%d: %s", c.Answered[k], k), 100) + "\n")
		}
		for i, cn := range c.List {
			if i == 8 {
				fmt.Fprintf(&b, "    … %d more (-json lists them)\n", len(c.List)-i)
				break
			}
			state := "open"
			if cn.ClosedBy != "" && !cn.Closed.IsZero() {
				state = "closed by " + cn.ClosedBy + ": " + cn.Reason
			}
			line := fmt.Sprintf("    #%-4d %-8s %s, max idle %s, %s", cn.ID, cn.Proto, text.Plural(cn.Requests, "request"),
				cn.MaxIdle.Round(time.Millisecond), state)
			if len(cn.Faults) > 0 {
				line += " [" + strings.Join(cn.Faults, ", ") + "]"
			}
			b.WriteString(text.Cut(line, 100) + "\n")
		}
	}
	u := r.Pool
	fmt.Fprintf(&b, "\nupstream pool   %s, %s (%d reused, %s)", text.Plural(u.Conns, "conn"),
		text.Plural(u.Requests, "request"), u.Reused, perConn(u.Requests, u.Conns))
	if u.IdleTimeout > 0 {
		fmt.Fprintf(&b, ", idle timeout %s (%s)", u.IdleTimeout, u.IdleSource)
	}
	b.WriteString("\n")
	for _, k := range sortedKeys(u.Closes) {
		fmt.Fprintf(&b, "    closed by %s ×%d\n", k, u.Closes[k])
	}
	for _, c := range r.Clients {
		if note := reuseNote(c, u); note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", c.Name, note)
		}
	}
	if len(r.Replays) > 0 {
		b.WriteString("\nreplays\n")
		for _, rp := range r.Replays {
			line := fmt.Sprintf("%s %s %s %s: #%d request %d %s (upstream %s), again on #%d request %d (upstream %s)",
				rp.Class, rp.Client, rp.First.Method, rp.First.Path, rp.First.Conn, rp.First.Nth,
				firstFate(rp.First), rp.First.Upstream, rp.Again.Conn, rp.Again.Nth, rp.Again.Upstream)
			for _, l := range text.Wrap(line, "  ", "      ", 100) {
				b.WriteString(l + "\n")
			}
		}
	}
	b.WriteString("\nverdicts\n")
	for _, v := range r.Verdicts {
		// The columns as a prefix: Wrap makes a run of spaces one.
		head := fmt.Sprintf("  %-7s %-24s ", strings.ToUpper(v.Result), v.Name)
		line := v.Client
		if v.Detail != "" {
			line += ": " + v.Detail
		}
		for _, l := range text.Wrap(line, head, "          ", 100) {
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// firstFate says what happened to a request sent again.
func firstFate(a Attempt) string {
	if a.Fault != "" {
		return "fault " + a.Fault
	}
	return a.Outcome
}

// reuseNote says when the client reuses its connections and the
// upstream pool does not, or the reverse.
func reuseNote(c Client, u UpstreamReport) string {
	if c.Conns == 0 || u.Conns == 0 || c.Requests < 4 {
		return ""
	}
	cr, ur := float64(c.Requests)/float64(c.Conns), float64(u.Requests)/float64(u.Conns)
	switch {
	case cr >= 2 && ur < 1.5:
		return "the client reuses its connections, the upstream pool does not"
	case ur >= 2 && cr < 1.5:
		return "the upstream pool reuses its connections, the client does not"
	}
	return ""
}

func perConn(requests, conns int) string {
	if conns == 0 {
		return "no conn"
	}
	return fmt.Sprintf("%.1f/conn", float64(requests)/float64(conns))
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Live returns one short line of the counts so far, and a number that
// changes whenever they do (to write a line only then).
func (p *Proxy) Live() (string, uint64) {
	v := p.version.Load()
	p.mu.Lock()
	open, clients, replays := len(p.conns), len(p.clients), len(p.replays)
	p.mu.Unlock()
	return fmt.Sprintf("proxy: %s, %s open, %s, %s, %s",
		text.Plural(clients, "client"), text.Plural(open, "conn"), text.Plural(int(p.requests.Load()), "request"),
		text.Plural(int(p.faults.Load()), "fault"), text.Plural(replays, "replay")), v
}
