package httptrace

import (
	"slices"
	"sync"
	"time"
	"weak"
)

// heldList is a Transport's recorders whose unclosed-body warning timer is
// armed. A request arms nothing: it sets when its body falls due (heldDue)
// on its recorder, and arms the recorder's timer only if it is not armed
// already, which it stays, re-armed for the body open then, until it fires
// with no body open. So a request takes neither this list's lock nor a
// timer's, and a recorder serving request after request joins the list
// and sets its timer once per warning delay at most.
//
// net/http's timers start the callbacks of the warnings due at once each
// on a goroutine of its own, which the scheduler runs in no set order (the
// last started often first): the first callback to run reports every
// warning due, oldest first, so that the observers see the bodies in the
// order they were left open and a warning given once per place names the
// first.
type heldList struct {
	mu sync.Mutex
	// armed holds the recorders whose timer is armed, weakly: an armed
	// timer keeps no recorder reachable, since a recycled recorder the
	// sync.Pool drops while its timer is armed must be collected as any
	// other. A recorder with a body open is kept reachable by the body.
	armed map[weak.Pointer[recorder]]struct{}
	// reporting is held by a callback from looking for the warnings due
	// to reporting the last of them, so that a second callback, which may
	// find later ones meanwhile, reports them after: finding and
	// reporting are one step. It is taken before any recorder's mu, never
	// after; mu is taken after a recorder's, never before.
	reporting sync.Mutex
}

// heldDue is a warning to report: its recorder, the generation it was
// armed for and when it fell due.
type heldDue struct {
	r   *recorder
	gen uint64
	due time.Time
}

// add adds the recorder of p to the list.
func (l *heldList) add(p weak.Pointer[recorder]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed == nil {
		l.armed = make(map[weak.Pointer[recorder]]struct{})
	}
	l.armed[p] = struct{}{}
}

// remove takes the recorder of p out of the list.
func (l *heldList) remove(p weak.Pointer[recorder]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.armed, p)
}

// recorders returns the recorders of the list still reachable.
func (l *heldList) recorders() []*recorder {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*recorder, 0, len(l.armed))
	for p := range l.armed {
		if r := p.Value(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// due returns the warnings of the list due by now, oldest first, and
// marks them reported. l.reporting is held.
func (l *heldList) due(now time.Time) []heldDue {
	var out []heldDue
	for _, r := range l.recorders() {
		r.mu.Lock()
		if due := r.tl.Start.Add(r.heldDue); r.heldOpenLocked() && !due.After(now) {
			out = append(out, heldDue{r: r, gen: r.gen, due: due})
			r.heldSet = false
		}
		r.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b heldDue) int { return a.due.Compare(b.due) })
	return out
}
