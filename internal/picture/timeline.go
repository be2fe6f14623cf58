package picture

import (
	"fmt"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Attempts returns tl's attempts as bars: one per connection the
// Transport handed the request (a hidden retry sends it again on
// another), each later one linked to the first. Their IDs are tl's id
// times 16 plus the attempt's index, unique while a request has fewer
// than 16 attempts (the 16th on share the last id).
func Attempts(tl *httptrace.Timeline) []Request {
	if tl == nil {
		return nil
	}
	// The attempts' bounds: each begins at the get-conn before its
	// got-conn (the first at the start) and ends before the next one's.
	var starts []int
	lastGet := 0
	for i, e := range tl.Events {
		if e.Late {
			continue
		}
		switch e.Kind {
		case vocab.KindGetConn:
			lastGet = i
		case vocab.KindGotConn:
			if len(starts) == 0 {
				starts = append(starts, 0)
			} else {
				starts = append(starts, lastGet)
			}
		}
	}
	if len(starts) == 0 {
		starts = []int{0}
	}
	label := tl.Method + " " + tl.URL()
	base := tl.ID * 16
	out := make([]Request, 0, len(starts))
	for a, from := range starts {
		to := len(tl.Events)
		if a+1 < len(starts) {
			to = starts[a+1]
		}
		r := attempt(tl, tl.Events[from:to], a == 0)
		r.ID, r.Timeline, r.Label = base+uint64(min(a, 15)), tl.ID, label
		if a+1 < len(starts) {
			r.Failed, r.Outcome = true, "sent again on another connection: the Transport's hidden retry"
		} else {
			r.Status = tl.Status
			r.Outcome, r.Failed = outcome(tl)
		}
		if a > 0 {
			r.RetryOf, r.Retry = base, "hidden retry"
		}
		out = append(out, r)
	}
	return out
}

// outcome is tl's outcome as a bar says it.
func outcome(tl *httptrace.Timeline) (string, bool) {
	o := tl.Outcome
	if !tl.Finished {
		return "not finished", false
	}
	if o.Class == vocab.ClassOK {
		if tl.Status != 0 {
			return fmt.Sprintf("ok: %d", tl.Status), false
		}
		return "ok", false
	}
	s := string(o.Class) + " @" + string(o.Stage)
	if o.Err != nil {
		s += ": " + tl.RedactError(o.Err)
	}
	return s, true
}

// attempt draws the events of one attempt; first is set for the
// request's first, which starts at the request's start.
func attempt(tl *httptrace.Timeline, evs []httptrace.Event, first bool) Request {
	at := func(d time.Duration) time.Time { return tl.Start.Add(d) }
	var r Request
	const none = time.Duration(-1)
	getConn, gotConn, wrote, wroteHeaders, firstByte, end := none, none, none, none, none, none
	dns, conn, tlsS := [2]time.Duration{none, none}, [2]time.Duration{none, none}, [2]time.Duration{none, none}
	startOf := none
	if first {
		startOf = 0
	}
	last := none
	for _, e := range evs {
		if e.Late {
			continue
		}
		if startOf < 0 {
			startOf = e.At
		}
		last = max(last, e.At)
		switch e.Kind {
		case vocab.KindGetConn:
			if getConn < 0 {
				getConn = e.At
			}
		case vocab.KindGotConn:
			gotConn = e.At
			r.Conn = e.Conn
		case vocab.KindDNSStart:
			dns[0] = e.At
		case vocab.KindDNSDone:
			dns[1] = e.At
		case vocab.KindConnectStart:
			if conn[0] < 0 {
				conn[0] = e.At
			}
		case vocab.KindConnectDone:
			conn[1] = e.At
		case vocab.KindTLSStart:
			tlsS[0] = e.At
		case vocab.KindTLSDone:
			tlsS[1] = e.At
		case vocab.KindWroteHeaders:
			wroteHeaders = e.At
		case vocab.KindWroteRequest:
			wrote = e.At
		case vocab.KindFirstByte:
			if firstByte < 0 {
				firstByte = e.At
			}
		case vocab.KindBodyEOF, vocab.KindBodyClose:
			if end < 0 {
				end = e.At
			}
		}
	}
	if r.Conn == 0 && first {
		r.Conn = tl.Conn.ID
	}
	if startOf < 0 {
		startOf = 0
	}
	last = max(last, startOf)
	r.Start, r.End = at(startOf), at(last)
	add := func(name string, a, b time.Duration) {
		if a >= 0 && b >= a {
			r.Stages = append(r.Stages, Stage{Name: name, From: at(a), To: at(b)})
		}
	}
	add("get conn", getConn, gotConn)
	add("dns", dns[0], dns[1])
	add("connect", conn[0], conn[1])
	add("tls", tlsS[0], tlsS[1])
	// As Timings: a request reported written after its first byte
	// (HTTP/2 may say so late) counts as written with its headers, or
	// when it got its connection.
	if wrote < 0 || (firstByte >= 0 && wrote > firstByte) {
		switch {
		case wroteHeaders >= 0 && (firstByte < 0 || wroteHeaders <= firstByte):
			wrote = wroteHeaders
		case firstByte >= 0 && gotConn >= 0:
			wrote = gotConn
		}
	}
	add("write", gotConn, wrote)
	add("server", wrote, firstByte)
	if end < 0 && firstByte >= 0 {
		end = last
	}
	add("transfer", firstByte, end)
	return r
}

// Lanes returns the connections the requests were sent on, as lanes
// known only from the requests (each from its first request's start to
// its last request's end): for outputs that list no connection of their
// own, such as a scenario's attempts.
func Lanes(reqs []Request) []Conn {
	var out []Conn
	idx := map[uint64]int{}
	for _, r := range reqs {
		if r.Conn == 0 {
			continue
		}
		i, ok := idx[r.Conn]
		if !ok {
			i = len(out)
			idx[r.Conn] = i
			out = append(out, Conn{ID: r.Conn, Dialed: r.Start, FirstUse: r.Start})
		}
		c := &out[i]
		if r.Start.Before(c.Dialed) {
			c.Dialed, c.FirstUse = r.Start, r.Start
		}
	}
	return out
}
