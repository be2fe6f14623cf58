// Package pictures turns each output the command line writes into the
// sets of lanes package picture draws: a probe's report, a scenario run's,
// serve's sessions'. It draws from what those outputs' JSON holds and
// nothing more: their connections with their times, and the timelines of
// their requests.
package pictures

import (
	"fmt"
	"strings"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/probe"
	"github.com/connaudit/connaudit/proxy"
	"github.com/connaudit/connaudit/serve"
)

// Probe is rep's set: a lane per listed connection, and reqs, the main
// run's attempts as the timelines [probe.OnProgress] hands over gave them
// ([picture.Attempts]); omitted counts those not kept.
func Probe(rep *probe.Result, reqs []picture.Request, omitted int) picture.Set {
	s := picture.Set{Title: fmt.Sprintf("probe %s %s", rep.Method, rep.Target), Requests: reqs, Omitted: omitted,
		OmittedConns: rep.ConnectionsOmitted}
	s.Notes = append(s.Notes, fmt.Sprintf("%d requests on %d connections (%d dialed)", rep.Requests, len(rep.Connections), rep.Dials))
	for _, f := range rep.Findings {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %s", f.Severity, f.ID))
	}
	for _, c := range rep.Connections {
		s.Conns = append(s.Conns, picture.Conn{ID: c.ID, Label: strings.TrimSpace(c.Proto + " " + c.TLSVersion),
			Dialed: c.DialedAt, FirstUse: c.FirstUsedAt, Closed: c.ClosedAt, ClosedBy: string(c.ClosedBy),
			Reason: string(c.CloseReason), Detail: c.CloseDetail, DialError: c.DialError})
	}
	return s
}

// Scenarios is a set per scenario run of rep, with its verdict: its
// request's attempts on the lanes of the connections they were sent on,
// the faulted connection closed as its fate says. A skipped scenario has
// no set.
func Scenarios(rep audit.Report) []picture.Set {
	var out []picture.Set
	for _, r := range rep.Results {
		if r.Skipped != "" || r.NotConfigurable != "" {
			continue
		}
		s := picture.Set{Title: r.Name, Verdict: "pass", Failed: !r.Pass}
		if !r.Pass {
			s.Verdict = "fail"
		}
		s.Notes = append(s.Notes, "fault: "+r.Fault)
		s.Notes = append(s.Notes, r.Mismatches...)
		tls := r.Observed.Attempts
		if len(tls) == 0 && r.Observed.Timeline != nil {
			tls = []*httptrace.Timeline{r.Observed.Timeline}
		}
		var first uint64
		for i, tl := range tls {
			reqs := picture.Attempts(tl)
			if i == 0 && len(reqs) > 0 {
				first = reqs[0].ID
			} else if len(reqs) > 0 && reqs[0].RetryOf == 0 {
				reqs[0].RetryOf, reqs[0].Retry = first, "the retry layer's attempt"
			}
			for j := range reqs {
				reqs[j].Fault = r.Fault
			}
			s.Requests = append(s.Requests, reqs...)
		}
		s.Conns = picture.Lanes(s.Requests)
		fate := r.Observed.Fate
		for i := range s.Conns {
			c := &s.Conns[i]
			if c.ID == r.Observed.Conn && fate.ClosedBy != "" {
				// Its close's time is not in the report: drawn at the
				// set's end.
				c.ClosedBy, c.Reason, c.Detail = string(fate.ClosedBy), string(fate.Reason), "(time not recorded)"
			}
			if c.ID == r.Observed.Conn {
				s.Notes = append(s.Notes, fmt.Sprintf("connection #%d: %s", c.ID, fate.Kind()))
			}
		}
		closeAtEnd(&s)
		out = append(out, s)
	}
	return out
}

// closeAtEnd gives a connection known to be closed, whose close time no
// output has, the set's last time.
func closeAtEnd(s *picture.Set) {
	var end time.Time
	for _, r := range s.Requests {
		if r.End.After(end) {
			end = r.End
		}
	}
	for i := range s.Conns {
		if c := &s.Conns[i]; c.ClosedBy != "" && c.Closed.IsZero() {
			c.Closed = end
		}
	}
}

// Session is a set per scenario of a serve session's report, from the
// server's evidence: a lane per connection from its accept to its close,
// a mark per request the server read on it. The server sees no stages.
func Session(r *serve.SessionReport) []picture.Set {
	var out []picture.Set
	who := redact.Text(strings.TrimSpace(r.Client.Name + " " + r.Client.Version))
	var id uint64
	for _, res := range r.Results {
		if len(res.Server.Connections) == 0 && res.Skipped != "" {
			continue
		}
		s := picture.Set{Title: fmt.Sprintf("%s %s: %s", who, r.Session, res.Name), Verdict: res.Verdict, Failed: !res.Pass}
		s.Notes = append(s.Notes, "fault: "+res.Fault, "the server's evidence: when it accepted, read and closed")
		for _, m := range res.Mismatches {
			s.Notes = append(s.Notes, redact.Text(m))
		}
		for _, c := range res.Server.Connections {
			s.Conns = append(s.Conns, picture.Conn{ID: c.ID, Dialed: c.AcceptedAt, FirstUse: c.FirstRequestAt, Closed: c.ClosedAt,
				ClosedBy: c.ClosedBy, Reason: c.How, Label: "server side"})
			for _, at := range c.RequestsAt {
				id++
				s.Requests = append(s.Requests, picture.Request{ID: id, Timeline: id, Conn: c.ID, Label: "request read by the server",
					Start: at, End: at, Outcome: "read", Fault: res.Fault})
			}
		}
		out = append(out, s)
	}
	return out
}

// Trace is the page of one request, as connaudit trace draws it: the
// lanes of its attempts, then its last attempt's waterfall with every
// event. A nil timeline's page has neither.
func Trace(tl *httptrace.Timeline) picture.Page {
	if tl == nil {
		return picture.Page{Title: "connaudit trace"}
	}
	reqs := picture.Attempts(tl)
	set := picture.Set{Title: tl.Method + " " + tl.URL(), Requests: reqs, Conns: picture.Lanes(reqs)}
	last := reqs[len(reqs)-1]
	pg := picture.Page{Title: "connaudit trace", Sets: []picture.Set{set}, Waterfall: &last}
	for _, e := range tl.Events {
		t := string(e.Kind)
		if e.Conn != 0 {
			t += fmt.Sprintf(" conn=#%d", e.Conn)
		}
		if e.N != 0 {
			t += fmt.Sprintf(" n=%d", e.N)
		}
		if e.Err != nil {
			t += " err=" + tl.RedactError(e.Err)
		}
		if e.Late {
			t += " (late)"
		}
		pg.Events = append(pg.Events, picture.Event{At: e.At, Text: t})
	}
	return pg
}

// Proxy is a set per client of a proxy's report, a lane per connection it
// lists from accept to close (first used at its first request), then a
// set of the upstream pool's connections from dial to close. The report
// holds no request's times: the lanes say each connection's requests.
func Proxy(rep *proxy.Report) []picture.Set {
	var out []picture.Set
	for _, c := range rep.Clients {
		s := picture.Set{Title: "client " + c.Name, OmittedConns: c.Conns - len(c.List)}
		s.Notes = append(s.Notes, fmt.Sprintf("%s on %s (%d reused), %s",
			text.Plural(c.Requests, "request"), text.Plural(c.Conns, "connection"), c.Reused, text.Plural(c.Faults, "fault")))
		for _, cn := range c.List {
			label := cn.Proto + " " + text.Plural(cn.Requests, "request")
			if len(cn.Faults) > 0 {
				label += " [" + strings.Join(cn.Faults, ", ") + "]"
			}
			pc := picture.Conn{ID: cn.ID, Label: label, Dialed: cn.Accepted, FirstUse: cn.FirstReq, Closed: cn.Closed,
				Detail: cn.Detail}
			if !cn.Closed.IsZero() {
				pc.ClosedBy, pc.Reason = cn.ClosedBy, cn.Reason
			}
			s.Conns = append(s.Conns, pc)
		}
		out = append(out, s)
	}
	u := rep.Pool
	s := picture.Set{Title: "upstream pool " + rep.Upstream}
	s.Notes = append(s.Notes, fmt.Sprintf("%s on %s (%d reused)", text.Plural(u.Requests, "request"),
		text.Plural(u.Conns, "connection"), u.Reused))
	for _, c := range u.List {
		pc := picture.Conn{ID: c.ID, Label: strings.TrimSpace(c.Proto + " " + text.Plural(c.Requests, "request")),
			Dialed: c.Dialed, FirstUse: c.FirstUsed, Closed: c.Closed}
		if !c.Open {
			pc.ClosedBy, pc.Reason = c.ClosedBy, c.Reason
		}
		s.Conns = append(s.Conns, pc)
	}
	out = append(out, s)
	return out
}
