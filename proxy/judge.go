package proxy

import (
	"fmt"
	"time"

	"github.com/connaudit/connaudit/internal/text"
)

// The verdicts' results.
const (
	resultPass    = "pass"
	resultFail    = "fail"
	resultSkipped = "skipped"
	resultFinding = "finding" // said, fails nothing
)

// The verdicts, in the audit's words.
const (
	verdictWriteTwice  = "write-committed-twice" // a write the upstream processed twice
	verdictHiddenRetry = "hidden-retry"          // a request sent again after its connection was lost
	verdictUnbounded   = "unbounded"             // a request held past the guard
	verdictIdle        = "server-idle-timeout"   // connections kept idle longer than the upstream allows
)

// judge returns each client's verdicts: a list of short rules over what
// the proxy saw, as probe's rules are.
func (p *Proxy) judge(rep *Report, cut []Attempt) []Verdict {
	var out []Verdict
	for _, c := range rep.Clients {
		writes, retries := 0, 0
		var lastWrite, lastRetry Replay
		for _, rp := range rep.Replays {
			if rp.Client != c.Name {
				continue
			}
			if rp.Class == classWriteTwice {
				writes++
				lastWrite = rp
			} else {
				retries++
				lastRetry = rp
			}
		}
		v := Verdict{Name: verdictWriteTwice, Client: c.Name, Result: resultPass}
		if writes > 0 {
			v.Result = resultFail
			v.Detail = fmt.Sprintf("%s committed twice upstream, as %s %s: sent again on connection #%d after %s on #%d",
				text.Plural(writes, "write"), lastWrite.First.Method, lastWrite.First.Path, lastWrite.Again.Conn,
				firstFate(lastWrite.First), lastWrite.First.Conn)
		}
		out = append(out, v)

		// A hidden retry is said, and fails nothing by itself (as serve's
		// finding): the request was not processed twice.
		v = Verdict{Name: verdictHiddenRetry, Client: c.Name, Result: resultPass}
		if retries > 0 {
			v.Result, v.Class = resultFinding, classHiddenRetry
			v.Detail = fmt.Sprintf("%s sent again by the client after its connection was lost (last: %s %s after %s); none processed twice",
				text.Plural(retries, "request"), lastRetry.First.Method, lastRetry.First.Path, firstFate(lastRetry.First))
		}
		out = append(out, v)

		v = Verdict{Name: verdictUnbounded, Client: c.Name, Result: resultPass}
		n := 0
		var last Attempt
		for _, a := range cut {
			if a.Client == c.Name {
				n++
				last = a
			}
		}
		switch {
		case p.cfg.guard == 0:
			v.Result, v.Detail = resultSkipped, "no -guard set"
		case n > 0:
			v.Result = resultFail
			v.Detail = fmt.Sprintf("%s held past the guard (%s) and cut, nothing of the client's ending them (last: %s %s)",
				text.Plural(n, "request"), p.cfg.guard, last.Method, last.Path)
		}
		out = append(out, v)

		v = Verdict{Name: verdictIdle, Client: c.Name, Result: resultPass}
		switch idle := rep.Pool.IdleTimeout; {
		case idle == 0:
			v.Result, v.Detail = resultSkipped, "the upstream's idle timeout is not known: state it (-upstream-idle) or let the run see it close one"
		case c.reqIdle >= idle: // a gap that ended in a close sent nothing on a stale connection
			v.Result = resultFail
			v.Detail = fmt.Sprintf("a request went on a connection idle %s, the upstream's idle timeout %s (%s): "+
				"drop idle connections sooner than %s", c.reqIdle.Round(time.Millisecond), idle, rep.Pool.IdleSource, idle)
		}
		out = append(out, v)
	}
	return out
}
