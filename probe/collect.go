package probe

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// maxFailures bounds the distinct failures a report lists.
const maxFailures = 10

// aggregator is the main run's [httptrace.Observer]: it folds each finished
// timeline into counts and fixed-size histograms, so that a long run costs
// the same memory as a short one (unless timelines are kept).
type aggregator struct {
	ctx     context.Context // the run's: a failure after it ended was cut by it
	keep    bool
	timeout time.Duration // the per-request timeout
	maxBody int64         // the body bytes read per response (MaxBody)
	// pool is the main run's *pool.Pool, for the evidence on the
	// connections hidden retries left; stream, if set, is handed each
	// timeline.
	pool   any
	stream func(*httptrace.Timeline)

	mu       sync.Mutex
	outcomes map[httptrace.Class]int
	statuses map[int]int
	failures []Failure
	cut      int
	hidden   int
	extra    int
	newConn  stageHists
	reused   stageHists
	// setup counts what each successful request on a new connection spent
	// setting it up (DNS, connect, TLS): what reuse saves.
	setup     histogram
	ev        evidence
	timelines []*httptrace.Timeline
	// run counts the latest requests alike in outcome and status before
	// they go into outcomes and statuses: a run of like requests, the
	// common case, updates no map.
	run struct {
		class  httptrace.Class
		status int // counted in statuses if ok
		ok     bool
		n      int
	}
	// lastTally is the tally of the connection lastTallyConn.
	lastTally     *connTally
	lastTallyConn uint64
	seq           uint64 // timelines observed
}

// connTally is what the main run's timelines say of one connection.
type connTally struct {
	// answered counts the requests whose response came on it: those
	// whose final connection it was.
	answered int
	// closeStatus is the status of the response on it that asked for the
	// connection to be closed (ConnClose), 0 if none did.
	closeStatus int
	// seq is when it last answered (aggregator.seq).
	seq uint64
}

// maxTallies bounds the connections tallied one by one; past it, the half
// that answered nothing for longest are folded into a summary.
const maxTallies = 2 * maxKeptConns

// connSummary sums the requests answered per connection.
type connSummary struct {
	conns, answered, min, max int
}

func (s *connSummary) add(n int) {
	if n <= 0 {
		return
	}
	if s.conns == 0 || n < s.min {
		s.min = n
	}
	s.max = max(s.max, n)
	s.conns++
	s.answered += n
}

// evidence is what the findings need beyond the report's numbers.
type evidence struct {
	// slowSetups counts the successful requests on new connections whose
	// setup (DNS + connect + TLS) took more than half the timeout;
	// slowestSetup is the longest of them.
	slowSetups   int
	slowestSetup time.Duration
	// newConnTimeouts counts, by stage, the requests that ran out of
	// their timeout while setting up a connection or later on a new one
	// (not those the probe's deadline cut).
	newConnTimeouts map[httptrace.Stage]int
	// conns holds, by connection id, what the timelines say of each
	// connection that carried a response, up to maxTallies of them;
	// folded sums up those folded out.
	conns  map[uint64]*connTally
	folded connSummary
	// unconnected holds the ids of the timelines that failed before
	// they got a connection (at most maxKeptConns of them; unconnectedAll
	// is unset past that): only their failure can have cancelled a dial
	// made for them.
	unconnected    map[uint64]bool
	unconnectedAll bool
	// retries is the evidence on the hidden retries.
	retries retryEvidence
	// bodies counts the responses whose body did not end within the
	// probe's bounds, or ended too soon (the deadline's cuts aside).
	bodies bodyFailures
	// unusedListed counts the listed HTTP/2 connections closed unused;
	// unusedSetup sums up how long they took to set up. idleDials counts
	// the listed connections dialed (not failed) that carried no request.
	unusedListed int
	unusedSetup  time.Duration
	idleDials    int
}

// failedUnconnected reports whether the timeline id failed before it got
// a connection, or may have: past the bound, any may have.
func (ev *evidence) failedUnconnected(id uint64) bool {
	return ev.unconnected[id] || !ev.unconnectedAll
}

// perConn sums up the requests answered per connection, over every
// connection that answered one.
func (ev *evidence) perConn() connSummary {
	s := ev.folded
	for _, t := range ev.conns {
		s.add(t.answered)
	}
	return s
}

// stageHists holds the stage durations of successful requests, a histogram
// per stage in [StageSet]'s order.
type stageHists struct {
	n int
	h [8]histogram
}

func (s *stageHists) add(t httptrace.Timings) {
	s.n++
	for i, d := range [8]time.Duration{t.DNS, t.Connect, t.TLS, t.PoolWait, t.Write, t.Server, t.Transfer, t.Total} {
		s.h[i].add(d)
	}
}

func (s *stageHists) set() StageSet {
	return StageSet{
		Count: s.n, DNS: s.h[0].percentiles(), Connect: s.h[1].percentiles(), TLS: s.h[2].percentiles(),
		PoolWait: s.h[3].percentiles(), Write: s.h[4].percentiles(), Server: s.h[5].percentiles(),
		Transfer: s.h[6].percentiles(), Total: s.h[7].percentiles(),
	}
}

// bodyFailures counts the main run's responses whose body did not end
// well, by how.
type bodyFailures struct {
	// overMax went on past MaxBody, where the probe stopped reading.
	overMax int
	// timedOut did not end within the request's timeout.
	timedOut int
	// truncated ended before their declared length.
	truncated int
}

// outcome is how a request ended, as the probe counts it.
type outcome struct {
	class httptrace.Class
	stage httptrace.Stage
	// overMax is set when the body went on past MaxBody: the tracer's
	// outcome is ok (the probe closed the body), the probe's a failure.
	overMax bool
	// ended is set when the request's context ended a body whose read
	// did not end with it, which the probe closed (sender.watch): the
	// tracer's outcome is ok, the probe's the context's; cause is the
	// context's cause.
	ended bool
	cause error
}

// outcomeOf returns how tl's request ended: as the tracer says, but for a
// body the probe closed before its end, which the tracer counts ok. The
// probe does so in two cases alone (a 101 response's body, the switched
// connection, aside):
//
//   - a body that went on past MaxBody. The probe reads one byte past
//     MaxBody to know whether the body ended there, so a body over the
//     bound is one of which it read more than MaxBody bytes. Such a body
//     did not end within the probe's bounds: the request failed, as trace
//     -max-body fails. Its class is "error", the vocabulary's for any
//     other failure: no class names a bound of the client's on the body's
//     size;
//   - a body whose read outlived the request's context (see
//     sender.watch): the context's end cut it, and its class is the
//     context's, as the tracer's would be had the read ended with it.
func (a *aggregator) outcomeOf(tl *httptrace.Timeline) outcome {
	o := outcome{class: tl.Outcome.Class, stage: tl.Outcome.Stage}
	if o.class != vocab.ClassOK || !tl.ClosedEarly && tl.BodyBytes <= a.maxBody {
		return o
	}
	if tl.BodyBytes > a.maxBody {
		return outcome{class: vocab.ClassError, stage: vocab.StageBody, overMax: true}
	}
	if tl.Status == http.StatusSwitchingProtocols {
		return o
	}
	if ctx := hook.Context(tl); ctx != nil && ctx.Err() != nil {
		cause := context.Cause(ctx)
		return outcome{class: vocab.ClassifyContext(ctx, cause, vocab.StageBody), stage: vocab.StageBody, ended: true, cause: cause}
	}
	return o
}

// overMaxText is the error text of a body that went on past MaxBody.
func overMaxText(maxBody int64) string {
	return fmt.Sprintf("probe: the body went on past MaxBody (%d bytes): closed there, before its end", maxBody)
}

func newAggregator(ctx context.Context, keep bool, timeout time.Duration, maxBody int64) *aggregator {
	return &aggregator{
		ctx: ctx, keep: keep, timeout: timeout, maxBody: maxBody,
		outcomes: map[httptrace.Class]int{},
		statuses: map[int]int{},
		ev: evidence{
			newConnTimeouts: map[httptrace.Stage]int{},
			conns:           map[uint64]*connTally{},
			unconnected:     map[uint64]bool{},
			unconnectedAll:  true,
		},
	}
}

func isTimeout(c httptrace.Class) bool {
	switch c {
	case vocab.ClassDeadline, vocab.ClassConnectTimeout, vocab.ClassTLSHandshakeTimeout,
		vocab.ClassResponseHeaderTimeout, vocab.ClassTimeout:
		return true
	}
	return false
}

// Observe folds one finished timeline in.
func (a *aggregator) Observe(tl *httptrace.Timeline) {
	t := tl.Timings()
	out := a.outcomeOf(tl)
	ok := out.class == vocab.ClassOK
	var kept *httptrace.Timeline
	if a.keep {
		kept = tl.Clone()
	}
	var (
		cut     bool
		errText string
	)
	switch {
	case out.overMax:
		// Not the deadline's doing, whenever it came.
		errText = overMaxText(a.maxBody)
	case out.ended:
		cut = a.ctx.Err() != nil
		errText = oneLine(out.cause.Error()) + " (the body's read did not end with it: closed by the probe)"
	case !ok:
		cut = a.ctx.Err() != nil
		errText = errorText(tl)
	}
	var verdict retryVerdict
	if tl.Retries > 0 {
		verdict = a.judgeRetry(tl)
	}
	if a.stream != nil {
		a.stream(tl)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	if kept != nil {
		a.timelines = append(a.timelines, kept)
	}
	if r := &a.run; r.n == 0 || r.class != out.class || r.ok != ok || (ok && r.status != tl.Status) {
		a.flushRunLocked()
		r.class, r.ok, r.status = out.class, ok, tl.Status
	}
	a.run.n++
	if n := tl.Retries; n > 0 {
		a.hidden++
		a.extra += n
		a.ev.retries.add(verdict)
	}
	if tl.Status > 0 && tl.Conn.ID != 0 {
		// The response came on the request's final connection; an
		// earlier attempt the Transport sent again elsewhere got none.
		c := a.lastTally
		if c == nil || a.lastTallyConn != tl.Conn.ID {
			// A run of requests on one connection finds its tally without
			// a map lookup.
			c = a.ev.conns[tl.Conn.ID]
			if c == nil {
				if len(a.ev.conns) >= maxTallies {
					a.foldTalliesLocked()
				}
				c = new(connTally)
				a.ev.conns[tl.Conn.ID] = c
			}
			a.lastTally, a.lastTallyConn = c, tl.Conn.ID
		}
		c.answered++
		c.seq = a.seq
		if tl.ConnClose {
			c.closeStatus = tl.Status
		}
	}
	if !ok && tl.Conn.ID == 0 {
		if len(a.ev.unconnected) < maxKeptConns {
			a.ev.unconnected[tl.ID] = true
		} else {
			a.ev.unconnectedAll = false
		}
	}
	if ok {
		if t.NewConn {
			a.newConn.add(t)
			d := t.DNS + t.Connect + t.TLS
			a.setup.add(d)
			if d > a.timeout/2 {
				a.ev.slowSetups++
				a.ev.slowestSetup = max(a.ev.slowestSetup, d)
			}
		} else {
			a.reused.add(t)
		}
		return
	}
	if cut {
		a.cut++
	} else if isTimeout(out.class) {
		if st := out.stage; vocab.SetupStage(st) || (tl.Conn.Dialed && st != vocab.StagePoolWait) {
			a.ev.newConnTimeouts[st]++
		}
	}
	if !cut && out.stage == vocab.StageBody {
		switch {
		case out.overMax:
			a.ev.bodies.overMax++
		case out.class == vocab.ClassBodyTruncated:
			a.ev.bodies.truncated++
		case isTimeout(out.class) || out.class == vocab.ClassBodyIdleTimeout:
			a.ev.bodies.timedOut++
		}
	}
	for i := range a.failures {
		f := &a.failures[i]
		if f.Class == out.class && f.Stage == out.stage {
			f.Count++
			return
		}
	}
	if len(a.failures) < maxFailures {
		a.failures = append(a.failures, Failure{Class: out.class, Stage: out.stage, Error: errText, Count: 1})
	}
}

// foldTalliesLocked folds the half of the connection tallies that answered
// nothing for longest into the summary: connections long gone, as a rule
// (a connection still in use answers again, and stays). a.mu is held.
func (a *aggregator) foldTalliesLocked() {
	seqs := make([]uint64, 0, len(a.ev.conns))
	for _, t := range a.ev.conns {
		seqs = append(seqs, t.seq)
	}
	slices.Sort(seqs)
	cut := seqs[len(seqs)/2]
	for id, t := range a.ev.conns {
		if t.seq < cut {
			a.ev.folded.add(t.answered)
			delete(a.ev.conns, id)
		}
	}
	a.lastTally, a.lastTallyConn = nil, 0
}

// flushRunLocked moves the run of like requests into the outcome and
// status counts; a.mu is held.
func (a *aggregator) flushRunLocked() {
	r := &a.run
	if r.n == 0 {
		return
	}
	a.outcomes[r.class] += r.n
	if r.ok {
		a.statuses[r.status] += r.n
	}
	r.n = 0
}

// fill writes what was aggregated into rep.
func (a *aggregator) fill(rep *Result) evidence {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushRunLocked()
	rep.Outcomes = a.outcomes
	rep.Statuses = a.statuses
	rep.Failures = a.failures
	if rep.Failures == nil {
		rep.Failures = []Failure{} // written as [], as documented
	}
	rep.Cut = a.cut
	rep.HiddenRetries, rep.ExtraAttempts = a.hidden, a.extra
	rep.Stages.New = a.newConn.set()
	rep.Stages.Reused = a.reused.set()
	if rep.Stages.New.Count > 0 && rep.Stages.Reused.Count > 0 {
		d := a.setup.percentiles().P50
		rep.Stages.ReuseSaves = &d
	}
	rep.Timelines = a.timelines
	return a.ev
}
