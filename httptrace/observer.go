package httptrace

import (
	"context"
	"errors"
	"sync"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/notify"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Observer receives each finished timeline, once, when the response body was
// closed or the round trip failed.
//
// Observe is called synchronously on the goroutine that finished the
// request, while the timeline is locked against late events. It must not
// retain tl after it returns: the recorder may reuse it. Keep a
// [Timeline.Clone] instead. Observe may be called concurrently for
// different requests.
type Observer interface {
	Observe(tl *Timeline)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(tl *Timeline)

// Observe calls f(tl); a nil f does nothing.
func (f ObserverFunc) Observe(tl *Timeline) {
	if f != nil {
		f(tl)
	}
}

// EventObserver is implemented by observers that also want each event as it
// is recorded, including late events after the timeline was finished.
//
// ObserveEvent is called synchronously from the goroutine that fired the
// hook — possibly concurrently for one request's events from different
// goroutines, but never concurrently for one timeline, whose recorder holds
// its lock during the call. It may read tl's fixed fields (ID, Attempt,
// Method, Host, Start, URL) and the fields the events established so far,
// and must not retain tl.
type EventObserver interface {
	Observer
	ObserveEvent(tl *Timeline, ev Event)
}

// eventKinds returns the kinds o wants: all, unless it says otherwise (an
// observer of the module's own, through internal/hook).
func eventKinds(o EventObserver) vocab.KindSet {
	if f, ok := o.(hook.Filter); ok {
		return f.EventKinds() & vocab.AllKinds
	}
	return vocab.AllKinds
}

// Multi returns an observer that calls each of observers in order. Those
// that are [EventObserver]s also receive events.
func Multi(observers ...Observer) Observer {
	m := multi{}
	for _, o := range observers {
		if o == nil {
			continue
		}
		m.obs = append(m.obs, o)
		if eo, ok := o.(EventObserver); ok {
			m.events = append(m.events, eo)
			m.kinds = append(m.kinds, eventKinds(eo))
		}
	}
	return m
}

type multi struct {
	obs    []Observer
	events []EventObserver
	kinds  []vocab.KindSet // the kinds each of events wants
}

func (m multi) Observe(tl *Timeline) {
	if tl == nil {
		return
	}
	for _, o := range m.obs {
		o.Observe(tl)
	}
}

func (m multi) ObserveEvent(tl *Timeline, ev Event) {
	if tl == nil {
		return
	}
	for i, o := range m.events {
		if m.kinds[i].Has(ev.Kind) {
			o.ObserveEvent(tl, ev)
		}
	}
}

// EventKinds implements hook.Filter: the kinds any of m's event observers
// wants.
func (m multi) EventKinds() vocab.KindSet {
	var s vocab.KindSet
	for _, k := range m.kinds {
		s |= k
	}
	return s
}

// Collector is an in-memory [EventObserver] for tests: it keeps a clone of
// every finished timeline and every late event. Its zero value is ready to
// use.
type Collector struct {
	mu        sync.Mutex
	timelines []*Timeline
	late      []LateEvent
	changes   notify.Changes
}

// LateEvent is an event recorded after its timeline was finished.
type LateEvent struct {
	// Timeline is the id of the timeline the event belongs to.
	Timeline uint64
	Event    Event
}

// Observe keeps a clone of tl.
func (c *Collector) Observe(tl *Timeline) {
	if c == nil || tl == nil {
		return
	}
	cl := tl.Clone()
	c.mu.Lock()
	c.timelines = append(c.timelines, cl)
	c.changes.Signal()
	c.mu.Unlock()
}

// ObserveEvent keeps late events.
func (c *Collector) ObserveEvent(tl *Timeline, ev Event) {
	if c == nil || tl == nil {
		return
	}
	if !ev.Late {
		return
	}
	c.mu.Lock()
	c.late = append(c.late, LateEvent{Timeline: tl.ID, Event: ev})
	c.changes.Signal()
	c.mu.Unlock()
}

// Timelines returns the finished timelines collected so far, in the order
// they finished.
func (c *Collector) Timelines() []*Timeline {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Timeline(nil), c.timelines...)
}

// Late returns the late events collected so far.
func (c *Collector) Late() []LateEvent {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LateEvent(nil), c.late...)
}

// Reset forgets everything collected.
func (c *Collector) Reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.timelines, c.late = nil, nil
	c.mu.Unlock()
}

// Wait blocks until cond, called with what was collected so far, returns
// true, or ctx ends. It returns ctx's error in the latter case.
func (c *Collector) Wait(ctx context.Context, cond func(timelines []*Timeline, late []LateEvent) bool) error {
	switch {
	case c == nil:
		return errors.New("httptrace: nil *Collector")
	case ctx == nil:
		return errors.New("httptrace: nil context")
	case cond == nil:
		return errors.New("httptrace: Collector.Wait: nil condition")
	}
	return notify.Wait(ctx, &c.mu, &c.changes, func() bool { return cond(c.timelines, c.late) })
}

// WaitN blocks until at least n timelines were collected or ctx ends.
func (c *Collector) WaitN(ctx context.Context, n int) error {
	return c.Wait(ctx, func(tls []*Timeline, _ []LateEvent) bool { return len(tls) >= n })
}
