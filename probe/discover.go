package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// Idle-timeout discovery's search: the first gap, the resolution it
// bisects to (the larger of an absolute and a relative one) and a bound on
// its bisection steps.
const (
	firstIdleGap      = 100 * time.Millisecond
	idleResolution    = 50 * time.Millisecond
	idleResolutionPct = 10
	maxBisectSteps    = 20
)

// session is one discovery phase's own pool, one connection at a time,
// apart from the main run's: its requests and dials are counted apart.
type session struct {
	pr    *prober
	p     *pool.Pool
	snd   *sender
	phase string

	mu   sync.Mutex
	last *httptrace.Timeline
	sent int
}

// Observe keeps the last finished timeline.
func (s *session) Observe(tl *httptrace.Timeline) {
	c := tl.Clone()
	s.mu.Lock()
	s.last = c
	s.mu.Unlock()
}

func (pr *prober) newSession(phase string, idle time.Duration) (*session, error) {
	s := &session{pr: pr, phase: phase}
	p, client, err := pr.newPool(s, 1, 1, idle, false)
	if err != nil {
		return nil, err
	}
	s.p, s.snd = p, pr.newSender(client)
	return s, nil
}

// close ends the session: its sender's timer, then its pool's connections.
func (s *session) close() {
	s.snd.close()
	s.pr.settle(s.p)
}

// one sends one request and returns its timeline, or nil when the run's
// context ended before it could be sent.
func (s *session) one() *httptrace.Timeline {
	s.mu.Lock()
	s.last = nil
	s.mu.Unlock()
	if !s.snd.send() {
		return nil
	}
	s.sent++
	s.pr.progress(Progress{Phase: s.phase, Done: s.sent})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// stopReason says why the run's context ended.
func (pr *prober) stopReason() string {
	pr.stopped.Store(true)
	if errors.Is(context.Cause(pr.ctx), errDeadline) {
		return "stopped by the deadline"
	}
	return "interrupted"
}

func failureText(tl *httptrace.Timeline) string {
	msg := fmt.Sprintf("%s @%s", tl.Outcome.Class, tl.Outcome.Stage)
	if tl.Outcome.Err != nil {
		msg += ": " + errorText(tl)
	}
	return msg
}

// findMaxRequests sends sequential requests on one connection until the
// server closes it, at most the configured bound. A close right after an
// error response gives no limit: a server may close after an error
// whatever its keep-alive limit.
func (pr *prober) findMaxRequests() *MaxRequestsResult {
	limit := pr.cfg.findMaxReqs
	res := &MaxRequestsResult{Bound: limit}
	s, err := pr.newSession("find-max-requests", pr.cfg.clientIdle)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	var (
		first      uint64
		count      int
		lastStatus int // the status of the last response on the connection
		switched   bool
	)
	for res.Requests < limit {
		tl := s.one()
		if tl == nil {
			res.Error = pr.stopReason()
			break
		}
		res.Requests++
		if tl.Outcome.Class != vocab.ClassOK {
			if pr.ctx.Err() != nil {
				res.Error = pr.stopReason()
			} else {
				res.Error = fmt.Sprintf("request %d failed: %s", res.Requests, failureText(tl))
			}
			break
		}
		if first == 0 {
			first = tl.Conn.ID
		}
		if tl.Conn.ID != first {
			// The connection is gone without a word on the last response:
			// a silent close or an HTTP/2 GOAWAY. Its reason is read once
			// the pool has settled.
			switched = true
			res.HiddenRetry = tl.Retries > 0
			break
		}
		count++
		lastStatus = tl.Status
		if tl.Status >= 400 {
			res.ErrorResponses++
		}
		if tl.ConnClose && tl.Status >= 400 {
			res.Error = fmt.Sprintf("the server answered request %d with %d and Connection: close, which says nothing of its keep-alive limit", count, tl.Status)
			break
		}
		if tl.ConnClose {
			res.Found, res.Limit = true, count
			res.How = string(vocab.ReasonConnectionClose)
			if tl.Proto == "HTTP/1.0" {
				res.How = string(vocab.ReasonHTTP10)
			}
			break
		}
	}
	s.close()
	res.Dials = s.p.Stats().Dials
	if switched {
		c, ok := s.p.Conn(first)
		switch {
		case ok && c.ClosedBy == vocab.ClosedByClient:
			res.Error = fmt.Sprintf("the client closed the connection after %d requests (%s)", count, c.CloseReason)
		case lastStatus >= 400:
			res.Error = fmt.Sprintf("the server closed the connection without notice right after a %d response to request %d, which says nothing of its keep-alive limit", lastStatus, count)
		default:
			res.Found, res.Limit = true, count
			res.How = "closed"
			if ok && c.CloseReason != "" {
				res.How = string(c.CloseReason)
			}
		}
	}
	return res
}

// findIdleTimeout brackets the server's keep-alive idle timeout: pairs of
// requests on a fresh connection separated by growing idle gaps, then a
// bisection between the longest gap survived and the shortest that was not.
func (pr *prober) findIdleTimeout() *IdleTimeoutResult {
	maxIdle := pr.cfg.maxIdle
	res := &IdleTimeoutResult{Max: maxIdle}
	// The client keeps idle connections forever here: only the server
	// may close them.
	s, err := pr.newSession("find-idle-timeout", 0)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		s.close()
		res.Dials = s.p.Stats().Dials
	}()
	// trial reports whether a connection idle for gap survived; ok is
	// false when the search must stop (res.Error says why).
	trial := func(gap time.Duration) (survived, ok bool) {
		if dl, has := pr.ctx.Deadline(); has && time.Until(dl) < gap {
			pr.stopped.Store(true)
			res.Error = fmt.Sprintf("stopped by the deadline: no time left for a %s gap", gap)
			return false, false
		}
		res.Trials++
		// A fresh connection for each trial, so that no trial depends on
		// how many requests an earlier one sent on it.
		s.p.CloseIdleConnections()
		a := s.one()
		if a == nil {
			res.Error = pr.stopReason()
			return false, false
		}
		res.Requests++
		switch {
		case a.Outcome.Class != vocab.ClassOK && pr.ctx.Err() != nil:
			res.Error = pr.stopReason()
			return false, false
		case a.Outcome.Class != vocab.ClassOK:
			res.Error = "request failed: " + failureText(a)
			return false, false
		case a.ConnClose && a.Status >= 400:
			res.Error = fmt.Sprintf("the server answered %d with Connection: close: no idle connection to measure", a.Status)
			return false, false
		case a.ConnClose:
			res.Error = "the server closes the connection after each response: no idle connection to measure"
			return false, false
		}
		pr.progress(Progress{Phase: s.phase, Done: s.sent, Idle: gap})
		if !pr.sleep(gap) {
			res.Error = pr.stopReason()
			return false, false
		}
		b := s.one()
		if b == nil {
			res.Error = pr.stopReason()
			return false, false
		}
		res.Requests++
		okB := b.Outcome.Class == vocab.ClassOK
		if !okB && pr.ctx.Err() != nil {
			res.Error = pr.stopReason()
			return false, false
		}
		if !okB && b.Conn.Dialed {
			res.Error = "request failed on a new connection: " + failureText(b)
			return false, false
		}
		// Survived: the second request reused the idle connection, and the
		// Transport did not have to retry it elsewhere.
		return okB && b.Conn.ID == a.Conn.ID && !b.Conn.New() && b.Retries == 0, true
	}
	gap := min(firstIdleGap, maxIdle)
	for {
		survived, ok := trial(gap)
		if !ok {
			return res
		}
		if !survived {
			res.Found, res.Closed = true, gap
			break
		}
		res.Survived = gap
		if gap >= maxIdle {
			res.Complete = true
			return res
		}
		gap = min(2*gap, maxIdle)
	}
	for step := 0; step < maxBisectSteps; step++ {
		lo, hi := res.Survived, res.Closed
		if hi-lo <= max(idleResolution, lo*idleResolutionPct/100) {
			break
		}
		mid := lo + (hi-lo)/2
		survived, ok := trial(mid)
		if !ok {
			return res
		}
		if survived {
			res.Survived = mid
		} else {
			res.Closed = mid
		}
	}
	res.Complete = true
	return res
}
