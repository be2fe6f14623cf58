package audit

import (
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// signals is an [httptrace.EventObserver] that signals, once per request,
// when a request for the fault path recorded an event of a kind, so that a
// scenario can act at a known stage rather than after a guess.
type signals struct {
	chans map[httptrace.Kind]chan struct{} // written only by newSignals
	kinds vocab.KindSet
}

func newSignals(kinds ...httptrace.Kind) *signals {
	s := &signals{chans: map[httptrace.Kind]chan struct{}{}, kinds: vocab.Of(kinds...)}
	for _, k := range kinds {
		s.chans[k] = make(chan struct{}, 64)
	}
	return s
}

// EventKinds implements hook.Filter: the kinds it watches.
func (s *signals) EventKinds() vocab.KindSet { return s.kinds }

// Observe does nothing: signals only watch events.
func (s *signals) Observe(*httptrace.Timeline) {}

// ObserveEvent signals the kinds it watches for the fault path.
func (s *signals) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	ch := s.chans[ev.Kind]
	if ch == nil || ev.Late {
		return
	}
	if u := tl.RawURL(); u.Path != faultPath {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// on returns the channel of kind k.
func (s *signals) on(k httptrace.Kind) <-chan struct{} { return s.chans[k] }
