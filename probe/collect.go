package probe

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// maxFailures bounds the distinct failures a report lists.
const maxFailures = 10

// aggregator is the main run's [httptrace.Observer]: it folds each finished
// timeline into counts and stage samples, so that a long run costs memory
// for its durations only (unless timelines are kept).
type aggregator struct {
	ctx  context.Context // the run's: a failure after it ended was cut by it
	keep bool

	mu        sync.Mutex
	outcomes  map[httptrace.Class]int
	statuses  map[int]int
	failures  []Failure
	cut       int
	hidden    int
	extra     int
	newConn   samples
	reused    samples
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
}

// connTally is what the main run's timelines say of one connection.
type connTally struct {
	// answered counts the requests whose response came on it: those
	// whose final connection it was.
	answered int
	// closeStatus is the status of the response on it that asked for the
	// connection to be closed (ConnClose), 0 if none did.
	closeStatus int
}

// evidence is what the findings need beyond the report's numbers.
type evidence struct {
	// setups are the connection setup times (DNS + connect + TLS) of the
	// successful requests on new connections.
	setups []time.Duration
	// newConnTimeouts counts, by stage, the requests that ran out of
	// their timeout while setting up a connection or later on a new one
	// (not those the probe's deadline cut).
	newConnTimeouts map[httptrace.Stage]int
	// conns holds, by connection id, what the timelines say of each
	// connection that carried a response.
	conns map[uint64]*connTally
	// unconnected holds the ids of the timelines that failed before
	// they got a connection (at most maxKeptConns of them; unconnectedAll
	// is unset past that): only their failure can have cancelled a dial
	// made for them.
	unconnected    map[uint64]bool
	unconnectedAll bool
}

// failedUnconnected reports whether the timeline id failed before it got
// a connection, or may have: past the bound, any may have.
func (ev *evidence) failedUnconnected(id uint64) bool {
	return ev.unconnected[id] || !ev.unconnectedAll
}

// samples holds the stage durations of successful requests, one row per
// request: a request appends one row (a single cache line) where a slice
// per stage would touch eight.
type samples struct {
	rows []stageRow
}

// stageRow is one request's stage durations, in [StageSet]'s order.
type stageRow [8]time.Duration

func (s *samples) add(t httptrace.Timings) {
	s.rows = append(s.rows, stageRow{t.DNS, t.Connect, t.TLS, t.PoolWait, t.Write, t.Server, t.Transfer, t.Total})
}

func (s *samples) set() StageSet {
	col := make([]time.Duration, len(s.rows))
	stage := func(i int) Percentiles {
		for j, r := range s.rows {
			col[j] = r[i]
		}
		return percentiles(col)
	}
	return StageSet{
		Count: len(s.rows), DNS: stage(0), Connect: stage(1), TLS: stage(2),
		PoolWait: stage(3), Write: stage(4), Server: stage(5),
		Transfer: stage(6), Total: stage(7),
	}
}

// percentiles sorts ds and returns its nearest-rank percentiles.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(p int) time.Duration {
		i := (p*len(ds) + 99) / 100 // ceil(p/100 * n)
		return ds[max(0, i-1)]
	}
	return Percentiles{P50: rank(50), P90: rank(90), P99: rank(99), Max: ds[len(ds)-1]}
}

func newAggregator(ctx context.Context, keep bool) *aggregator {
	return &aggregator{
		ctx: ctx, keep: keep,
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
	ok := tl.Outcome.Class == vocab.ClassOK
	var kept *httptrace.Timeline
	if a.keep {
		kept = tl.Clone()
	}
	var (
		cut     bool
		errText string
	)
	if !ok {
		cut = a.ctx.Err() != nil
		errText = errorText(tl)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept != nil {
		a.timelines = append(a.timelines, kept)
	}
	if r := &a.run; r.n == 0 || r.class != tl.Outcome.Class || r.ok != ok || (ok && r.status != tl.Status) {
		a.flushRunLocked()
		r.class, r.ok, r.status = tl.Outcome.Class, ok, tl.Status
	}
	a.run.n++
	if n := tl.Retries; n > 0 {
		a.hidden++
		a.extra += n
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
				c = new(connTally)
				a.ev.conns[tl.Conn.ID] = c
			}
			a.lastTally, a.lastTallyConn = c, tl.Conn.ID
		}
		c.answered++
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
			a.ev.setups = append(a.ev.setups, t.DNS+t.Connect+t.TLS)
		} else {
			a.reused.add(t)
		}
		return
	}
	if cut {
		a.cut++
	} else if isTimeout(tl.Outcome.Class) {
		if st := tl.Outcome.Stage; setupStage(st) || (tl.Conn.Dialed && st != vocab.StagePoolWait) {
			a.ev.newConnTimeouts[st]++
		}
	}
	for i := range a.failures {
		f := &a.failures[i]
		if f.Class == tl.Outcome.Class && f.Stage == tl.Outcome.Stage {
			f.Count++
			return
		}
	}
	if len(a.failures) < maxFailures {
		a.failures = append(a.failures, Failure{Class: tl.Outcome.Class, Stage: tl.Outcome.Stage, Error: errText, Count: 1})
	}
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
func (a *aggregator) fill(rep *Report) evidence {
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
		d := rep.Stages.New.Total.P50 - rep.Stages.Reused.Total.P50
		rep.Stages.ReuseSaves = &d
	}
	rep.Timelines = a.timelines
	return a.ev
}
