package serve

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// OnSessionEnd has f called with the report of every session as it ends,
// whatever ends it: its kit's done, the idle reaper, a failed setup, or
// [Server.Close]. Nothing is kept for later and nothing is dropped: f
// gets every report, once.
//
// The concurrency rule: f is called from the goroutine that ends the
// session (a done's handler, the reaper, Close), one call at a time — two
// calls never overlap, and each report is passed in the order the calls
// are made — and the session's end waits for f: a kit's done is answered
// once f has returned. A slow f therefore slows the kits down (at most as
// many sessions wait as are open) instead of losing their reports. f must
// not call [Server.Close], which waits for it. Given several times, every
// f is called, in the order given.
func OnSessionEnd(f func(*SessionReport)) Option {
	return optionFunc(func(c *config) {
		if f == nil {
			c.err = errors.Join(c.err, errors.New("serve: OnSessionEnd: the function is nil"))
			return
		}
		c.onEnd = append(c.onEnd, f)
	})
}

// maxEndedIDs is how many ended sessions' ids a server remembers, so that
// a kit's late call on one is told the session is done (409), not that it
// never was (404).
const maxEndedIDs = 1024

// endings delivers ended sessions' reports and remembers their ids.
type endings struct {
	deliver sync.Mutex     // held while the callbacks run: one report at a time
	pending sync.WaitGroup // sessions ending, whose report is not yet delivered

	// ids is a ring of the last maxEndedIDs ended sessions' ids, indexed
	// by set; guarded by the server's mutex.
	ids  []string
	next int
	set  map[string]struct{}
}

// remember records the id of an ended session, forgetting the oldest past
// maxEndedIDs; s.mu is held.
func (e *endings) remember(id string) {
	if e.set == nil {
		e.set = make(map[string]struct{}, maxEndedIDs)
		e.ids = make([]string, maxEndedIDs)
	}
	if old := e.ids[e.next]; old != "" {
		delete(e.set, old)
	}
	e.ids[e.next] = id
	e.set[id] = struct{}{}
	e.next = (e.next + 1) % maxEndedIDs
}

// ended reports whether id is a session that ended lately; s.mu is held.
func (e *endings) ended(id string) bool {
	_, ok := e.set[id]
	return ok
}

// begin notes a session that started ending; s.mu is held.
func (s *Server) beginEnd() { s.ends.pending.Add(1) }

// finishEnd hands an ended session's report to the OnSessionEnd
// functions, one report at a time.
func (s *Server) finishEnd(rep *SessionReport) {
	defer s.ends.pending.Done()
	if len(s.cfg.onEnd) == 0 {
		return
	}
	s.ends.deliver.Lock()
	defer s.ends.deliver.Unlock()
	for _, f := range s.cfg.onEnd {
		f(rep)
	}
}

// sessionDone is the answer to a call on a session that ended.
func sessionDone(id string) error {
	return &apiErr{code: http.StatusConflict, msg: fmt.Sprintf("session %s is done", printable(id))}
}
