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

// endings delivers ended sessions' reports.
type endings struct {
	deliver sync.Mutex     // held while the callbacks run: one report at a time
	pending sync.WaitGroup // sessions ending, whose report is not yet delivered
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
