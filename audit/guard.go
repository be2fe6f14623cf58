package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/connaudit/connaudit/httptrace"
)

// The guard ends a faulted call that nothing ends, without ever judging a
// bound of the client's by racing it:
//
//   - By the scenario's own guard (firstGuard: three times its wait and a
//     second, at least 2s) every bound of the reference pool and of the
//     catalogue's drivers has fired.
//   - A call still running then is looked at: the stage its attempt in
//     flight is at, and what bounds that stage. A bound the runner sees (a
//     transport field, a net.Dialer's Timeout, the pool's body-idle
//     watchdog, package retry's budgets) is waited for, from when its
//     clock started, plus a margin that grows with it (margin). A bound it
//     cannot see (a dial function of the transport's own, the caller's
//     retry layer) is waited for up to the guard deadline, plus its
//     margin. Only a stage still in progress then is unbounded.
//   - A bound the runner sees that is longer than the guard deadline is
//     not waited for: the scenario says so, with the deadline that would
//     judge it ([GuardDeadline]), and is never called unbounded.

// errGuard is the cause with which the guard ends a call.
var errGuard = errors.New("audit: guard deadline: no client bound fired")

// defaultGuardDeadline is the longest bound of the client's that the guard
// waits for, unless [GuardDeadline] says otherwise.
const defaultGuardDeadline = 10 * time.Second

// maxGuardChecks bounds the times the guard looks at a call in flight: it
// looks again only when a stage began after it last looked.
const maxGuardChecks = 1000

// margin is how long past a bound d the guard waits for it to fire: half
// again, at least a second, so that a loaded machine's late timer and the
// client's teardown are not taken for a missing bound.
func margin(d time.Duration) time.Duration { return max(time.Second, d/2) }

// firstGuard is the scenario's own guard: by then the catalogue's bounds
// and drivers have ended the call. Three times the scenario's wait, so that
// a loaded machine's timers firing late, or a trickle of 24 waits, do not
// meet it.
func firstGuard(s Scenario) time.Duration {
	return max(2*time.Second, 3*s.Wait+time.Second)
}

// deadline returns the guard deadline in force: the longest bound the
// runner waits for.
func (r *Runner) deadline() time.Duration {
	if r.guard > 0 {
		return r.guard
	}
	return defaultGuardDeadline
}

// bound is what the runner knows of one bound on a stage.
type bound struct {
	name  string        // the setting, as a fix names it
	d     time.Duration // its length; 0 (known): nothing bounds the stage
	known bool          // the runner sees it; if not, only the client knows
}

func (b bound) String() string {
	if b.d > 0 {
		return fmt.Sprintf("%s (%v)", b.name, b.d)
	}
	return b.name
}

// guardEnd is how a guarded call ended.
type guardEnd struct {
	err error // the driver's
	// cut is set when the guard ended the call; stage is then the stage
	// of the attempt in flight ("" between attempts), limit the wait that
	// ran out, and beyond the bound on that stage the runner saw and did
	// not wait for, being longer than the guard deadline.
	cut    bool
	at     time.Time
	stage  httptrace.Stage
	within string // the wait that ran out, in a verdict's words
	beyond *bound
}

// guarded runs s's driver, ending it when nothing ends it (see the rules
// above).
func (r *Runner) guarded(ctx context.Context, s Scenario, e *env, sub subject) guardEnd {
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	start := time.Now()
	drive := driver(&s)
	go func() { done <- drive(gctx, e) }()
	first := firstGuard(s)
	dl := r.deadline()
	// hard is when a call whose bounds the runner cannot see is ended;
	// one with a bound it sees pending is waited for up to last.
	hard := start.Add(first + dl + margin(dl))
	last := hard.Add(dl + margin(dl))
	next := start.Add(first)
	var end guardEnd
	extended := false // past hard, the wait for the attempt in flight
	for range maxGuardChecks {
		t := time.NewTimer(time.Until(next))
		select {
		case err := <-done:
			t.Stop()
			return guardEnd{err: err}
		case <-t.C:
			select {
			case err := <-done: // it ended as the timer fired
				return guardEnd{err: err}
			default:
			}
		}
		now := time.Now()
		w := r.wait(s, e, sub, start, first)
		switch {
		case w.until.After(now) && now.Before(hard):
			next = minTime(w.until, hard)
			continue
		case !extended && !w.known.IsZero() && w.known.After(now):
			// Past the deadline, a bound the runner sees is still to
			// fire on the attempt in flight: never cut what the client
			// is about to end. Once: a layer that goes on trying is
			// ended at its next look.
			extended = true
			next = minTime(w.known, last)
			continue
		}
		end = guardEnd{cut: true, at: now, stage: w.stage, within: w.within, beyond: w.beyond}
		break
	}
	if !end.cut {
		end = guardEnd{cut: true, at: time.Now(), within: fmt.Sprintf("%v", last.Sub(start).Round(time.Second))}
	}
	cancel(errGuard)
	// A driver ends once its context does; one that does not (a retry
	// layer that makes requests of its own context) is waited for as long
	// as a recovery, then left to the leak check.
	t := time.NewTimer(r.recovery)
	defer t.Stop()
	select {
	case end.err = <-done:
	case <-t.C:
		end.err = errors.New("the call did not return once its context had ended")
	}
	return end
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// guardWait is how long the guard waits for a call in flight, and why.
type guardWait struct {
	until  time.Time // the soonest moment a bound has fired by
	known  time.Time // the same for the bounds the runner sees
	stage  httptrace.Stage
	within string // the wait, in a verdict's words
	beyond *bound // a bound it sees, longer than the deadline
}

// wait says until when the guard waits for the call of s, past the
// scenario's own guard: the soonest moment by which a bound on its
// attempt in flight, or on the call, has fired.
func (r *Runner) wait(s Scenario, e *env, sub subject, start time.Time, first time.Duration) guardWait {
	dl := r.deadline()
	// Cut at the scenario's own guard, the stage had no bound to wait
	// for: the guard deadline is for a bound the runner cannot see.
	w := guardWait{until: start.Add(first), within: fmt.Sprintf("the scenario's guard (%v, three times its wait and a "+
		"second, at least 2s; the guard deadline, %v, waits only for a bound the audit cannot see)", first, dl)}
	f, inFlight := e.progress.inFlight()
	var soonest time.Time
	var within string
	consider := func(b bound, from time.Time) {
		var until time.Time
		var why string
		switch {
		case !b.known:
			// Past the scenario's own guard, as long as the longest bound
			// the runner waits for, and half again.
			l := first + dl + margin(dl)
			until = from.Add(l)
			why = fmt.Sprintf("%v (the scenario's guard, then the guard deadline, %v, and half again), waiting for %s",
				l, dl, b.name)
		case b.d <= 0:
			return
		case b.d > dl:
			if w.beyond == nil || b.d < w.beyond.d {
				w.beyond = &b
			}
			return
		default:
			until = from.Add(b.d + margin(b.d))
			why = fmt.Sprintf("%v, half again its %s", b.d+margin(b.d), b)
			if w.known.IsZero() || until.Before(w.known) {
				w.known = until
			}
		}
		if soonest.IsZero() || until.Before(soonest) {
			soonest, within = until, why
		}
	}
	if inFlight {
		w.stage = f.stage
		consider(sub.bounds(f.stage), f.since)
		if hc, name := sub.healthCheck(); hc > 0 && s.Proto == HTTP2 && f.stage != httptrace.StageDNS &&
			f.stage != httptrace.StageConnect && f.stage != httptrace.StageTLS {
			// Over HTTP/2 the health check bounds every stage on a
			// connection: one that went dark is closed, and its streams
			// with it, within its time of the last frame read.
			consider(bound{name: "HTTP/2 health check: " + name, d: hc, known: true}, f.since)
		}
		if want := s.Expect.Stage; want != "" && stageOrder[f.stage] < stageOrder[want] {
			// Short of the stage the fault holds it at, the request is
			// slow (a loaded machine), not hung there: it is waited for
			// as a bound the runner cannot see.
			consider(bound{name: "the request to reach stage " + string(want)}, start)
		}
	} else if ended := e.progress.endedAt(); !ended.IsZero() {
		// An attempt just ended (its bound fired as the guard looked):
		// the call returns, or goes on to the next attempt, at once.
		consider(bound{name: "the end of the attempt", d: time.Nanosecond, known: true}, ended)
	}
	if s.Contract != "" {
		if r.retryLayer == nil {
			// Package retry applies the contract's budgets.
			if inFlight {
				consider(bound{name: "AttemptTimeout", d: s.Policy.AttemptTimeout, known: true}, f.start)
			}
			consider(bound{name: "TotalTimeout", d: s.Policy.TotalTimeout, known: true}, start)
		} else {
			consider(bound{name: "the retry layer under audit"}, start)
		}
	}
	if !soonest.IsZero() && soonest.After(w.until) {
		w.until, w.within = soonest, within
	}
	return w
}

// progress follows the faulted path's attempts in flight: the stage each
// is at, and since when. It is an [httptrace.EventObserver].
type progress struct {
	mu    sync.Mutex
	live  map[uint64]*flight
	last  uint64    // the attempt in flight started last
	ended time.Time // when an attempt last ended
	// started holds the ids of every attempt seen to start, finished or
	// not: one whose body is never closed never finishes.
	started map[uint64]bool
}

// flight is one attempt in flight.
type flight struct {
	start, since time.Time
	stage        httptrace.Stage
}

func newProgress() *progress {
	return &progress{live: map[uint64]*flight{}, started: map[uint64]bool{}}
}

// startedAfter counts the attempts seen to start whose id is above mark.
func (p *progress) startedAfter(mark uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for id := range p.started {
		if id > mark {
			n++
		}
	}
	return n
}

// latest returns the largest id of an attempt seen to start, 0 if none.
func (p *progress) latest() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var id uint64
	for i := range p.started {
		id = max(id, i)
	}
	return id
}

// Observe forgets a finished attempt.
func (p *progress) Observe(tl *httptrace.Timeline) {
	p.mu.Lock()
	p.endLocked(tl.ID)
	p.mu.Unlock()
}

func (p *progress) endLocked(id uint64) {
	if _, ok := p.live[id]; ok {
		delete(p.live, id)
		p.ended = time.Now()
	}
}

// endedAt returns when an attempt last ended, zero if none did.
func (p *progress) endedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// ObserveEvent moves the attempt to the stage the event begins.
func (p *progress) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	if ev.Late {
		return
	}
	if u := tl.RawURL(); u.Path != faultPath {
		return
	}
	st, ok := stageBegun(ev.Kind)
	if !ok && ev.Kind != httptrace.KindDone {
		return
	}
	at := tl.Start.Add(ev.At)
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Kind == httptrace.KindDone {
		p.endLocked(tl.ID)
		return
	}
	p.started[tl.ID] = true
	f := p.live[tl.ID]
	if f == nil {
		f = &flight{start: tl.Start}
		p.live[tl.ID] = f
		p.last = tl.ID
	}
	// HTTP/2 may report a request written after its response came (see
	// httptrace's wroteBodiless): a request with its response stays in
	// the body stage.
	if f.stage != st && f.stage != httptrace.StageBody {
		f.stage, f.since = st, at
	}
}

// inFlight returns the attempt in flight started last.
func (p *progress) inFlight() (flight, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.live[p.last]; f != nil {
		return *f, true
	}
	// Another may still be in flight (an earlier attempt's dial).
	var latest *flight
	for _, f := range p.live {
		if latest == nil || f.start.After(latest.start) {
			latest = f
		}
	}
	if latest == nil {
		return flight{}, false
	}
	return *latest, true
}

// stageOrder ranks the stages in the order a request goes through them.
var stageOrder = map[httptrace.Stage]int{
	httptrace.StagePoolWait: 1, httptrace.StageDNS: 2, httptrace.StageConnect: 3, httptrace.StageTLS: 4,
	httptrace.StageWrite: 5, httptrace.StageAwaitHeaders: 6, httptrace.StageBody: 7,
}

// stageBegun returns the stage that an event of kind k begins, if any.
func stageBegun(k httptrace.Kind) (httptrace.Stage, bool) {
	switch k {
	case httptrace.KindGetConn:
		return httptrace.StagePoolWait, true
	case httptrace.KindDNSStart:
		return httptrace.StageDNS, true
	case httptrace.KindConnectStart:
		return httptrace.StageConnect, true
	case httptrace.KindTLSStart:
		return httptrace.StageTLS, true
	case httptrace.KindGotConn:
		return httptrace.StageWrite, true
	case httptrace.KindWroteRequest:
		return httptrace.StageAwaitHeaders, true
	case httptrace.KindResponse:
		return httptrace.StageBody, true
	}
	return "", false
}

// measuredBound says how long the client's own bound took to end the
// faulted request at its stage, when a timeout ended it: "connect ended by
// the client after 2.00s". The catalogue names the bound; this is what it
// measured.
func measuredBound(tl *httptrace.Timeline) string {
	if tl == nil || !tl.Finished {
		return ""
	}
	switch tl.Outcome.Class {
	case httptrace.ClassConnectTimeout, httptrace.ClassTLSHandshakeTimeout, httptrace.ClassResponseHeaderTimeout,
		httptrace.ClassBodyIdleTimeout, httptrace.ClassDeadline, httptrace.ClassTimeout:
	default:
		return ""
	}
	stage := tl.Outcome.Stage
	var since, end time.Duration
	found := false
	for _, ev := range tl.Events {
		if ev.Late {
			continue
		}
		if st, ok := stageBegun(ev.Kind); ok && st == stage && !found {
			since, found = ev.At, true
		}
		end = ev.At
	}
	if !found {
		return ""
	}
	return fmt.Sprintf("%s ended by the client after %.2fs (%s)", stage, (end - since).Seconds(), tl.Outcome.Class)
}
