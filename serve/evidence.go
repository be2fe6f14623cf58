package serve

import (
	"slices"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/vocab"
)

// faultConns counts the connections the scenario's requests came on before
// /ok: the faulted requests' and a first caller's hold.
func faultConns(st *scenarioState) int {
	var seen []*connRec
	for _, r := range slices.Concat(st.hold, st.fault) {
		if !slices.Contains(seen, r.conn) {
			seen = append(seen, r.conn)
		}
	}
	return len(seen)
}

// evidence gathers what the server saw of st; s.mu is held.
func evidence(se *session, st *scenarioState, fs *faultserver.Server) Evidence {
	var ev Evidence
	sp := st.sp
	if sp.on <= onRawH2 {
		c := fs.Counters(st.faultPath)
		ev.Requests, ev.HandlersEntered, ev.CancelsObserved, ev.Writes = c.RequestsRead, c.HandlersEntered, c.CancelsObserved, c.WritesCommitted
		ev.Unread = c.Unread
		w := int64(warmUps(sp))
		ev.Requests = max(0, ev.Requests-w)
		ev.HandlersEntered = max(0, ev.HandlersEntered-w)
		ev.IdempotencyKeys = fs.IdempotencyKeys(st.faultPath)
	}
	if sp.on == onTLSStall && se.stall != nil {
		ev.ConnsAccepted = se.stall.ConnsAccepted()
	}
	// Each connection the scenario's requests came on, with the requests
	// of this scenario on it (a client's pool may carry others' too).
	var seen []*connRec
	here := map[*connRec]int{}
	times := map[*connRec][]time.Time{}
	for _, r := range slices.Concat(st.hold, st.fault, st.ok) {
		if !slices.Contains(seen, r.conn) {
			seen = append(seen, r.conn)
		}
		here[r.conn]++
		times[r.conn] = append(times[r.conn], r.at)
	}
	slices.SortFunc(seen, func(a, b *connRec) int { return a.accepted.Compare(b.accepted) })
	for _, c := range seen {
		ce := ConnEvidence{ID: c.ref.id, Requests: here[c], Reused: c.requests > 1,
			AcceptedAt: c.accepted, FirstRequestAt: c.firstReq, RequestsAt: times[c]}
		slices.SortFunc(ce.RequestsAt, func(a, b time.Time) int { return a.Compare(b) })
		if c.closed {
			ce.ClosedBy, ce.How, ce.ClosedAfterMS = c.closedBy, c.how, ms(c.closedAt.Sub(c.lastReq))
			ce.ClosedAt = c.closedAt
		}
		ev.Connections = append(ev.Connections, ce)
	}
	for i := 1; i < len(st.fault); i++ {
		if i <= warmUps(sp) {
			continue
		}
		ev.AttemptGapsMS = append(ev.AttemptGapsMS, ms(st.fault[i].at.Sub(st.fault[i-1].at)))
	}
	if len(st.ok) > 0 {
		okc := st.ok[0].conn
		ev.OKConn = okc.ref.id
		ev.OKReused = len(st.fault) > 0 && st.fault[len(st.fault)-1].conn == okc
	}
	return ev
}

// fateOf is what became of the faulted request's connection, as the
// audit says it: where the kit asked the server to settle, as of the
// settle's answer.
func fateOf(st *scenarioState, rep *KitReport) audit.Fate {
	if st.sp.on > onRawH2 || len(st.fault) == 0 {
		return audit.Fate{None: true}
	}
	c := st.fault[len(st.fault)-1].conn
	if len(st.ok) > 0 && st.ok[0].conn == c {
		return audit.Fate{Reused: true}
	}
	if !c.closed || st.openAtSettle == c {
		return audit.Fate{}
	}
	if c.closedBy == "server" {
		switch {
		case c.how == "rst":
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerReset}
		case st.sp.fault == faultserver.Fault(faultserver.ConnectionClose{}) && st.sp.Proto == audit.HTTP2:
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerGoAway}
		case st.sp.fault == faultserver.Fault(faultserver.ConnectionClose{}):
			return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonConnectionClose}
		}
		return audit.Fate{ClosedBy: vocab.ClosedByServer, Reason: vocab.ReasonServerEOF}
	}
	switch {
	case rep != nil && rep.Outcome != nil && rep.Outcome.Error != nil:
		return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonRequestError}
	case st.sp.Steps == audit.StepsReadThenClose:
		return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonEarlyBodyClose}
	}
	return audit.Fate{ClosedBy: vocab.ClosedByClient, Reason: vocab.ReasonClient}
}
