package pool

import (
	"fmt"
	"io"

	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/vocab"
)

// writeHTML writes s as the debug page's picture: a lane per connection
// from its dial to its close, a bar per stretch of its state history it
// was active (the pool keeps no request's stages), with who closed it and
// why.
func (s Snapshot) writeHTML(w io.Writer) error {
	set := picture.Set{Title: "connections", End: s.Time}
	set.Notes = append(set.Notes, fmt.Sprintf("%d open, %d active, %d idle; %d dials, %d requests, %d reused",
		s.Total.Open, s.Total.Active, s.Total.Idle, s.Total.Dials, s.Total.Requests, s.Total.ReusedRequests),
		"a bar is a stretch of a connection's history in the state active, as the JSON's history lists it")
	var id uint64
	for _, c := range s.Conns {
		set.Conns = append(set.Conns, picture.Conn{ID: c.ID, Label: c.Host + " " + c.Proto, Dialed: c.DialedAt,
			FirstUse: c.FirstUsedAt, Closed: c.ClosedAt, ClosedBy: string(c.ClosedBy), Reason: string(c.CloseReason),
			Detail: c.CloseDetail, DialError: c.DialError})
		for i, h := range c.History {
			if h.State != vocab.StateActive {
				continue
			}
			end := s.Time
			if i+1 < len(c.History) {
				end = c.History[i+1].At
			} else if !c.ClosedAt.IsZero() {
				end = c.ClosedAt
			}
			id++
			set.Requests = append(set.Requests, picture.Request{ID: id, Timeline: id, Conn: c.ID, Label: "active",
				Start: h.At, End: end, Outcome: string(c.State)})
		}
	}
	return picture.WriteHTML(w, picture.Page{Title: "connaudit pool", Sets: []picture.Set{set}})
}
