package httptrace

import (
	"sync"
	"time"
)

// heldList is a Transport's unclosed-body warnings armed and not yet
// reported, in the order they were armed, which is the order they fall
// due (one delay for all). net/http's timers start the callbacks of the
// warnings due at once each on a goroutine of its own, which the
// scheduler runs in no set order (the last started often first): the
// first callback to run reports every warning due, oldest first, so that
// the observers see the bodies in the order they were left open and a
// warning given once per place names the first.
type heldList struct {
	mu         sync.Mutex
	head, tail *recorder
	// reporting is held by a callback from taking the warnings due to
	// reporting the last of them, so that a second callback, which may
	// take later ones meanwhile, reports them after: taking and reporting
	// are one step. It is taken before any recorder's mu, never after.
	reporting sync.Mutex
}

// heldDue is a warning taken from the list to report: its recorder and
// the generation it was armed for.
type heldDue struct {
	r   *recorder
	gen uint64
}

// push adds r, armed for generation gen and due at due, at the end of
// the list, or moves it there.
func (l *heldList) push(r *recorder, gen uint64, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.heldIn {
		l.unlinkLocked(r)
	}
	r.heldDue, r.heldDueGen, r.heldIn = due, gen, true
	r.heldPrev, r.heldNext = l.tail, nil
	if l.tail != nil {
		l.tail.heldNext = r
	} else {
		l.head = r
	}
	l.tail = r
}

// remove takes r out of the list, if it is in it.
func (l *heldList) remove(r *recorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.heldIn {
		l.unlinkLocked(r)
	}
}

func (l *heldList) unlinkLocked(r *recorder) {
	if r.heldPrev != nil {
		r.heldPrev.heldNext = r.heldNext
	} else {
		l.head = r.heldNext
	}
	if r.heldNext != nil {
		r.heldNext.heldPrev = r.heldPrev
	} else {
		l.tail = r.heldPrev
	}
	r.heldPrev, r.heldNext, r.heldIn = nil, nil, false
}

// due takes out of the list the warnings due by now, oldest first.
func (l *heldList) due(now time.Time) []heldDue {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []heldDue
	for r := l.head; r != nil && !r.heldDue.After(now); r = l.head {
		out = append(out, heldDue{r: r, gen: r.heldDueGen})
		l.unlinkLocked(r)
	}
	return out
}
