package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/pool"
)

// verdicts states a retry contract's mismatches as its verdicts, named by
// the contract: "A5: 500 was retried: 3 requests, contract 1".
func verdicts(s Scenario, sub subject, o Observed, mismatches []string) []string {
	if s.Contract == "" {
		return mismatches
	}
	e := s.Expect
	out := make([]string, 0, len(mismatches))
	for _, m := range mismatches {
		switch {
		case strings.HasPrefix(m, "server-seen requests:") && o.ServerRequests > e.ServerRequests:
			m = fmt.Sprintf("%s was retried: %s, contract %d", s.Subject, text.Plural(o.ServerRequests, "request"), e.ServerRequests)
		case strings.HasPrefix(m, "server-seen requests:"):
			m = fmt.Sprintf("%s was not retried as the contract says: %s, contract %d", s.Subject, text.Plural(o.ServerRequests, "request"), e.ServerRequests)
		case strings.HasPrefix(m, "client attempts:") && o.ClientAttempts > e.ClientAttempts && !o.Unbounded &&
			s.Subject == "503" && e.Class != httptrace.ClassDeadline && o.ClientAttempts > s.Policy.MaxRetries+1:
			m = fmt.Sprintf("%d attempts where MaxRetries=%d allows %d: the layer does not apply MaxRetries",
				o.ClientAttempts, s.Policy.MaxRetries, s.Policy.MaxRetries+1)
			if sub.retryDefaults {
				m = fmt.Sprintf("%d attempts where MaxRetries=%d allows %d: at its defaults the layer retries more",
					o.ClientAttempts, s.Policy.MaxRetries, s.Policy.MaxRetries+1)
			}
		case strings.HasPrefix(m, "client attempts:") && o.ClientAttempts > e.ClientAttempts && !o.Unbounded &&
			s.Subject == "503" && e.Class == httptrace.ClassDeadline && o.ClientAttempts <= s.Policy.MaxRetries+1:
			// As many attempts as MaxRetries allows: the budget, which
			// counts the delays, allows fewer.
			m = fmt.Sprintf("%d attempts, which MaxRetries=%d allows, where the budget allows %d: TotalTimeout (%v) "+
				"ends during the delay (%v) before attempt %d", o.ClientAttempts, s.Policy.MaxRetries, e.ClientAttempts,
				s.Policy.TotalTimeout, s.Policy.Delay, e.ClientAttempts+1)
		case strings.HasPrefix(m, "client attempts:") && o.ClientAttempts > e.ClientAttempts && !o.Unbounded &&
			s.Subject == "503" && e.Class == httptrace.ClassDeadline:
			// More than either limit allows.
			m = fmt.Sprintf("%d attempts, where the budget allows %d (TotalTimeout (%v) ends during the delay (%v) "+
				"before attempt %d) and MaxRetries=%d allows %d: the layer applies neither", o.ClientAttempts, e.ClientAttempts,
				s.Policy.TotalTimeout, s.Policy.Delay, e.ClientAttempts+1, s.Policy.MaxRetries, s.Policy.MaxRetries+1)
		case strings.HasPrefix(m, "writes committed:"):
			m = fmt.Sprintf("the server committed %s, contract %d", text.Plural(o.Writes, "write"), *e.Writes)
		}
		out = append(out, s.Contract+": "+m)
	}
	return out
}

// unreadMismatch begins the mismatch of requests sent on a stale
// connection, which only a connection kept alive can be.
const unreadMismatch = "requests sent on a connection the server was closing, unread: "

// lateAttempts begins the mismatch of a retry layer that went on trying
// once the call's context had ended.
const lateAttempts = "retry layer: "

// splitErrors returns the messages of a joined error.
func splitErrors(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// compare lists every difference between what was expected and observed.
func compare(e Expect, o Observed) []string {
	var m mismatches
	m.outcome(e, o)
	m.counts(e, o)
	m.evidence(e, o)
	m.recovery(e, o)
	return m
}

// mismatches collects what a scenario saw that it did not expect.
type mismatches []string

func (m *mismatches) add(format string, args ...any) { *m = append(*m, fmt.Sprintf(format, args...)) }

// outcome compares the faulted request's outcome, stage and status. A
// request the guard ended has the guard's outcome, and its connection the
// fate of one cut short: the runner reports it unbounded (or beyond the
// guard), and those are not compared.
func (m *mismatches) outcome(e Expect, o Observed) {
	if o.ClientAttempts == 0 {
		m.add("no faulted request was recorded")
		return
	}
	if o.Unbounded || o.Beyond != "" {
		return
	}
	if e.Class != "" && o.Class != e.Class {
		m.add("outcome: expected %s, observed %s%s", e.Class, o.Class, errSuffix(o.Error))
	}
	// A request that met its connection closed beneath it while writing
	// its body lost it to the server's close before any response, as one
	// that lost it awaiting the headers did ([closedBeneath]).
	beneath := o.beneath && o.Stage == httptrace.StageWrite && e.Stage == httptrace.StageAwaitHeaders
	if e.Stage != "" && o.Stage != e.Stage && !beneath {
		m.add("stage: expected %s, observed %s", e.Stage, o.Stage)
	}
	if e.Status != 0 && o.Status != e.Status {
		m.add("status: expected %d, observed %d", e.Status, o.Status)
	}
}

// counts compares what the client sent with what the server saw: attempts,
// requests, hidden retries, dials, writes, handler entries, connections
// accepted, the cancel.
func (m *mismatches) counts(e Expect, o Observed) {
	if o.ClientAttempts != e.ClientAttempts {
		m.add("client attempts: expected %d, observed %d", e.ClientAttempts, o.ClientAttempts)
	}
	if o.ServerRequests != e.ServerRequests {
		m.add("server-seen requests: expected %d, observed %d", e.ServerRequests, o.ServerRequests)
	}
	switch {
	case o.HiddenRetry && !e.HiddenRetry:
		m.add("hidden transport retry: the server saw %d requests for %d client attempts", o.ServerRequests, o.ClientAttempts)
	case !o.HiddenRetry && e.HiddenRetry:
		m.add("expected a hidden transport retry, none seen")
	}
	if e.Dials != nil && o.Dials != *e.Dials {
		m.add("dials: expected %d, observed %d", *e.Dials, o.Dials)
	}
	if e.Writes != nil && o.Writes != *e.Writes {
		m.add("writes committed: expected %d, observed %d", *e.Writes, o.Writes)
	}
	if e.Unread != nil && o.Unread != *e.Unread {
		m.add(unreadMismatch+"expected %d, observed %d", *e.Unread, o.Unread)
	}
	if e.HandlersEntered != nil && o.HandlersEntered != *e.HandlersEntered {
		m.add("handler entries: expected %d, observed %d", *e.HandlersEntered, o.HandlersEntered)
	}
	if e.ConnsAccepted != nil && o.ConnsAccepted != *e.ConnsAccepted {
		m.add("connections the server accepted: expected %d, observed %d", *e.ConnsAccepted, o.ConnsAccepted)
	}
	if e.CancelObserved && !o.CancelObserved {
		m.add("the server did not observe the client's cancel")
	}
}

// evidence compares the connection's fate, the leak the scenario plants
// and the body the client read.
func (m *mismatches) evidence(e Expect, o Observed) {
	if f := e.Fate; f != nil && !o.Unbounded && o.Beyond == "" && !givenUpUnderLoad(e, o) {
		if f.ClosedBy != o.Fate.ClosedBy || f.Reason != o.Fate.Reason || f.Reused != o.Fate.Reused || f.None != o.Fate.None {
			m.add("connection fate: expected %s, observed %s", f, o.Fate)
		}
	}
	if e.Leak {
		// The pool's check must name the open body, and over HTTP/1 the
		// connection it pins.
		if !anyHasPrefix(o.LeakFound, "open body:") {
			m.add("the leak was not detected: no open body named")
		}
		if e.BlocksOK && !anyHasPrefix(o.LeakFound, "active connection #") {
			m.add("the leak was not detected: no pinned connection named")
		}
	}
	if e.BodyAtLeast > 0 && o.Timeline != nil && o.Timeline.Timings().Transfer < e.BodyAtLeast {
		// Timers do not fire early: a body the server spread over this
		// long cannot have come sooner.
		m.add("body: expected to take at least %v, it took %v", e.BodyAtLeast, o.Timeline.Timings().Transfer)
	}
	if e.BodyBytes != nil && o.BodyBytes != *e.BodyBytes {
		m.add("body bytes: expected %d, observed %d", *e.BodyBytes, o.BodyBytes)
	}
}

// recovery compares what became of /ok, and lists what was left behind.
func (m *mismatches) recovery(e Expect, o Observed) {
	if e.BlocksOK != o.BlockedOK {
		if e.BlocksOK {
			m.add("expected /ok to wait for the leaked connection; it did not")
		} else {
			m.add("/ok waited for the leaked connection")
		}
	}
	if !o.Recovered {
		m.add("not recovered: the pool did not serve /ok")
	}
	for _, l := range o.Leaks {
		if strings.HasPrefix(l, "recovery:") {
			m.add("%s", l)
			continue
		}
		m.add("leak after recovery: %s", l)
	}
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// anyHasPrefix reports whether one of ss starts with prefix.
func anyHasPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// fitAttemptLimit raises the attempt limit of a contract whose attempt the
// transport's own read bound must end (A7: its ResponseHeaderTimeout; A10:
// its body idle timeout) above that bound, when the transport's is not
// well below the catalogue's limit: the contract orders the two bounds,
// and the catalogue's limit (3s) is the catalogue's number, not the
// client's. A transport without the bound keeps the limit, and fails the
// contract. It returns the note that says so, "" when nothing changed.
func (sub subject) fitAttemptLimit(s *Scenario) string {
	limit := s.Policy.AttemptTimeout
	if sub.reference || s.Contract == "" || limit <= 0 {
		return ""
	}
	var name string
	var own time.Duration
	switch {
	case s.Expect.Class == httptrace.ClassResponseHeaderTimeout && s.Expect.Stage == httptrace.StageAwaitHeaders:
		name, own = "ResponseHeaderTimeout", sub.rht
	case s.Expect.Class == httptrace.ClassBodyIdleTimeout && s.Expect.Stage == httptrace.StageBody:
		name, own = nameBodyIdleTimeout, sub.bodyIdle
	}
	if own <= 0 || own < limit-limit/10 {
		return ""
	}
	raised := own + max(own/2, time.Second)
	s.Policy.TotalTimeout += raised - limit
	s.Policy.AttemptTimeout = raised
	return fmt.Sprintf("attempt limit %v, not the catalogue's %v: above the transport's %s (%v), "+
		"which the contract orders below it", raised, limit, name, own)
}

// tie says so, for a contract whose attempt either the transport's
// ResponseHeaderTimeout or the retry layer's attempt limit ends, when the
// two are too close (within a tenth of the limit) for one to be sure to
// fire first: which did is then a race between two timers, and no verdict
// may rest on it. "" otherwise.
func (sub subject) tie(s Scenario) string {
	limit := s.Policy.AttemptTimeout
	if sub.reference || s.Contract == "" || limit <= 0 {
		return ""
	}
	var name string
	var own time.Duration
	switch {
	case s.Expect.Stage == httptrace.StageAwaitHeaders &&
		(s.Expect.Class == httptrace.ClassResponseHeaderTimeout || s.Expect.Class == httptrace.ClassDeadline):
		name, own = "ResponseHeaderTimeout", sub.rht
	case s.Expect.Stage == httptrace.StageBody &&
		(s.Expect.Class == httptrace.ClassBodyIdleTimeout || s.Expect.Class == httptrace.ClassDeadline):
		name, own = nameBodyIdleTimeout, sub.bodyIdle
	}
	if own <= 0 || own < limit-limit/10 || own > limit+limit/10 {
		return ""
	}
	return fmt.Sprintf("%s: too close to tell apart: %s (%v) and the attempt limit (%v): "+
		"either may end the attempt first, so which did is no verdict", s.Contract, name, own, limit)
}

// givenUpUnderLoad reports whether the connection the scenario expects
// reused was given up by net/http after a request that succeeded, for no
// reason of the fault's: its HTTP/1 read loop does so when the write
// goroutine has not reported the request written within 50ms of the
// response (maxWriteWaitBeforeConnReuse), which a loaded machine's
// scheduling causes. The fault's verdict does not rest on it; the note
// says so ([givenUpNote]). A transport that keeps no connection
// (DisableKeepAlives, a negative MaxIdleConnsPerHost) is not excused: the
// pool names its closes keep-alives-disabled, never client-close.
func givenUpUnderLoad(e Expect, o Observed) bool {
	return e.Fate != nil && e.Fate.Reused && o.Class == httptrace.ClassOK &&
		o.Fate.ClosedBy == pool.ClosedByClient && o.Fate.Reason == pool.ReasonClient
}

// givenUpNote is the note of a connection [givenUpUnderLoad].
const givenUpNote = "connection fate: closed by client (client-close) after the request succeeded, not reused: " +
	"net/http gives a connection up when its write goroutine reports the request written more than 50ms " +
	"after the response (a loaded machine); no verdict rests on it"
