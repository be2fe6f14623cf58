package pool

import (
	"fmt"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// The churn trap: an idle pool that keeps fewer connections than the
// requests to a host need at once closes connections as their requests
// end ("idle-pool-full") and dials again for the next ones. pool.New keeps
// http.DefaultTransport's 2 idle connections per host: four workers
// sending 500 requests each on loopback redial tens to more than a hundred
// connections, eight workers hundreds, where a MaxIdleConnsPerHost of 4 (or
// 8) dials 4 (or 8) in all. The pool says so once, through its observers,
// as an "idle-pool-churn" event that httptrace's slog observer logs as a
// warning.
//
// The threshold: churnCloses closes for a full idle pool among fewer than
// churnRequests consecutive requests to one host, 2 in 100 requests paying
// a dial that a larger idle pool would have saved. It is counted in
// requests, not time, so that a busy and a quiet service are judged alike;
// the ten closes keep a single burst of a few requests, or a close now and
// then, below it.
const (
	churnCloses   = 10
	churnRequests = 500
)

// churnWindow remembers the last churnCloses closes of a host's
// connections for a full idle pool: the host's request count and the time
// at each.
type churnWindow struct {
	reqs [churnCloses]int64
	at   [churnCloses]time.Time
	n    int // closes recorded in all
}

// add records a close at the host's request count req, at now, and
// returns the requests and the time that the last churnCloses closes
// spanned, with whether they are churn.
func (w *churnWindow) add(req int64, now time.Time) (reqs int64, span time.Duration, churn bool) {
	i := w.n % churnCloses
	w.reqs[i], w.at[i] = req, now
	w.n++
	if w.n < churnCloses {
		return 0, 0, false
	}
	oldest := w.n % churnCloses
	reqs = req - w.reqs[oldest]
	return reqs, now.Sub(w.at[oldest]), reqs < churnRequests
}

// churnLocked counts the close of c, a connection to the host of h, for a
// full idle pool at now, and once the closes are churn that a cap on idle
// connections explains, readies the pool's one warning for the next event
// it observes (the lock is held here; observers are called without it).
func (p *Pool) churnLocked(c *connState, h *counters, now time.Time) {
	if p.churnWarned {
		return
	}
	reqs, span, churn := h.churn.add(h.requests, now)
	if !churn {
		return
	}
	w := &hook.Churn{Host: c.Host, Closes: churnCloses, Requests: int(reqs) + 1, Span: span}
	switch perHost := p.maxIdlePerHost(); {
	case h.maxInFlight > perHost:
		w.Setting, w.Limit, w.InFlight = "MaxIdleConnsPerHost", perHost, h.maxInFlight
		w.Fix = fmt.Sprintf("raise MaxIdleConnsPerHost to %d: pool.MaxIdleConnsPerHost(%d), or the field of "+
			"the transport given to pool.Track", h.maxInFlight, h.maxInFlight)
	case p.tr.MaxIdleConns > 0 && p.peaks.maxInFlight > p.tr.MaxIdleConns:
		w.Setting, w.Limit, w.InFlight = "MaxIdleConns", p.tr.MaxIdleConns, p.peaks.maxInFlight
		w.Fix = fmt.Sprintf("raise MaxIdleConns to %d, the field of the transport given to pool.Track "+
			"(pool.New keeps 100)", p.peaks.maxInFlight)
	default:
		// No cap explains the closes (the requests in flight at once
		// never passed one): nothing to advise.
		return
	}
	p.churnWarned = true
	p.churnNote = w
	p.churnPending.Store(true)
}

// warnChurn hands the pool's churn warning, if one is ready, to the
// observers that want it, as an event on tl, the timeline of the request
// the pool observes (an event of the pool's, not of that request's), at
// offset at; the pool's lock must not be held.
func (p *Pool) warnChurn(tl *httptrace.Timeline, at time.Duration) {
	p.mu.Lock()
	w := p.churnNote
	p.churnNote = nil
	p.churnPending.Store(false)
	p.mu.Unlock()
	if w == nil {
		return
	}
	hook.Emit(p.traced, tl, httptrace.Event{Kind: vocab.KindIdlePoolChurn, At: at, N: int64(w.Closes), Addr: w.Host, Err: w})
}
