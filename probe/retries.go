package probe

import (
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/attempts"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Why a request the Transport sent again was not processed by the server
// the first time (Result.HiddenRetriesWhy):
const (
	// whyNeverWritten: no byte of the attempt reached the connection.
	whyNeverWritten = "never-written"
	// whyServerClosedFirst: the server's close of the HTTP/1 connection
	// came before any byte of the attempt was written.
	whyServerClosedFirst = "server-closed-first"
	// whyStaleIdle: the attempt went out on an HTTP/1 connection idle
	// for at least the server's idle timeout (as it advertised it, as
	// discovery found it, or as the run saw it close idle connections),
	// and the server closed it without a response byte: the
	// stale-connection race, in which the server closed first.
	whyStaleIdle = "stale-idle"
	// whyH2Refused: the attempt's HTTP/2 stream was written, and the
	// Transport sent it again, which it does only for a stream above the
	// last stream id of the server's GOAWAY, one the server refused
	// (REFUSED_STREAM), or one it reset with PROTOCOL_ERROR; the first two
	// were not processed (RFC 9113, 8.7), and every reset with
	// PROTOCOL_ERROR is counted as possibly processed instead.
	whyH2Refused = "h2-goaway-or-refused"
)

// maxPendingIdle bounds the retries kept for judgement against the
// server's idle timeout; past it they count as possibly processed.
const maxPendingIdle = 4096

// retryVerdict is the evidence on one request the Transport sent again.
// Its attempts before the last are judged one by one; the request was
// processed only if one of them may have been.
type retryVerdict struct {
	// rank orders the verdicts: 0 not processed (why), 1 an HTTP/2 stream
	// written (h2-goaway-or-refused, unless reset with PROTOCOL_ERROR), 2
	// an HTTP/1 attempt judged against the server's idle timeout (idle),
	// 3 possibly processed.
	rank int
	why  string
	idle time.Duration
}

const (
	rankNotProcessed = iota
	rankH2Written
	rankPendingIdle
	rankPossibly
)

// worse returns the verdict of a request with attempts judged v and w.
func (v retryVerdict) worse(w retryVerdict) retryVerdict {
	switch {
	case w.rank > v.rank:
		return w
	case w.rank == v.rank && w.rank == rankPendingIdle && w.idle < v.idle:
		return w
	}
	return v
}

// retryEvidence sums up the verdicts of the main run's hidden retries.
type retryEvidence struct {
	notProcessed map[string]int
	possibly     int
	h2Written    int
	pendingIdle  []time.Duration
}

func (r *retryEvidence) add(v retryVerdict) {
	switch v.rank {
	case rankNotProcessed:
		r.count(v.why)
	case rankH2Written:
		r.h2Written++
		r.count(whyH2Refused)
	case rankPendingIdle:
		if len(r.pendingIdle) < maxPendingIdle {
			r.pendingIdle = append(r.pendingIdle, v.idle)
		} else {
			r.possibly++
		}
	default:
		r.possibly++
	}
}

func (r *retryEvidence) count(why string) {
	if r.notProcessed == nil {
		r.notProcessed = map[string]int{}
	}
	r.notProcessed[why]++
}

// judge writes the verdicts into rep, once the server's idle timeout is
// known as well as it will be (idle, 0 if not at all) and the number of
// HTTP/2 streams the server reset with PROTOCOL_ERROR (resets).
func (r *retryEvidence) judge(rep *Result, idle time.Duration, resets int64) {
	why := map[string]int{}
	for k, n := range r.notProcessed {
		why[k] = n
	}
	possibly := r.possibly
	for _, d := range r.pendingIdle {
		if idle > 0 && d >= idle-idle/8 {
			why[whyStaleIdle]++
		} else {
			possibly++
		}
	}
	if n := int(min(resets, int64(r.h2Written))); n > 0 {
		why[whyH2Refused] -= n
		if why[whyH2Refused] == 0 {
			delete(why, whyH2Refused)
		}
		possibly += n
	}
	rep.HiddenRetriesWhy = why
	rep.HiddenRetriesPossiblyProcessed = possibly
	rep.HiddenRetriesNotProcessed = 0
	for _, n := range why {
		rep.HiddenRetriesNotProcessed += n
	}
}

// judgeRetry returns the verdict on tl, a request the Transport sent again:
// each attempt but the last is judged on what its timeline and the pool
// saw of it.
func (a *aggregator) judgeRetry(tl *httptrace.Timeline) retryVerdict {
	v, judged := retryVerdict{rank: -1}, false
	for conn, wrote := range attempts.Abandoned(tl) {
		v = v.worse(a.judgeAttempt(conn, wrote))
		judged = true
	}
	if !judged {
		// The timeline lost the events that show the attempts (it was
		// full): nothing says the server did not process them.
		return retryVerdict{rank: rankPossibly}
	}
	return v
}

// judgeAttempt judges one attempt of a request, sent on connection conn
// (wrote: its timeline saw the headers written), which the Transport then
// sent again elsewhere.
func (a *aggregator) judgeAttempt(conn uint64, wrote bool) retryVerdict {
	if !wrote {
		// No header was written: nothing reached the server.
		return retryVerdict{rank: rankNotProcessed, why: whyNeverWritten}
	}
	if conn == 0 || a.pool == nil || hook.LastAttempt == nil {
		return retryVerdict{rank: rankPossibly}
	}
	at, ok := hook.LastAttempt(a.pool, conn)
	switch {
	case !ok:
		return retryVerdict{rank: rankPossibly}
	case at.H2:
		return retryVerdict{rank: rankH2Written}
	case !at.Wrote:
		// The headers went into the Transport's buffer, but no byte of
		// them reached the connection.
		return retryVerdict{rank: rankNotProcessed, why: whyNeverWritten}
	case at.ClosedFirst:
		return retryVerdict{rank: rankNotProcessed, why: whyServerClosedFirst}
	case at.ServerClosed && at.Idle > 0:
		return retryVerdict{rank: rankPendingIdle, idle: at.Idle}
	}
	return retryVerdict{rank: rankPossibly}
}

// serverIdleTimeout returns the shortest idle timeout the evidence gives
// the server, 0 if none: what it advertised (Keep-Alive: timeout=N), the
// shortest gap idle-timeout discovery saw a connection not survive, and
// the shortest idle time after which the main run saw it close one.
func serverIdleTimeout(rep *Result) time.Duration {
	var t time.Duration
	shorter := func(d time.Duration) {
		if d > 0 && (t == 0 || d < t) {
			t = d
		}
	}
	shorter(rep.KeepAlive.Timeout)
	if d := rep.Discovery; d != nil && d.IdleTimeout != nil && d.IdleTimeout.Found {
		shorter(d.IdleTimeout.Closed)
	}
	for _, c := range rep.Connections {
		if c.CloseReason == vocab.ReasonServerClosedIdle {
			shorter(c.IdleBeforeClose)
		}
	}
	return t
}
