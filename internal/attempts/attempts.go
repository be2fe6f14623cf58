// Package attempts reads, from the timeline of a request the Transport
// sent again by itself, each attempt it gave up: the evidence on which the
// pool and the probe judge whether the server may have processed it.
package attempts

import (
	"iter"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Abandoned yields, for each attempt of tl's request that the Transport
// gave up to send the request again (a GotConn later followed by a
// GetConn, late events aside), the id of the connection it was sent on and
// whether the timeline saw its headers written. The last attempt, which
// the request ended with, is not among them; an attempt whose events the
// timeline lost (it was full) is not either.
func Abandoned(tl *httptrace.Timeline) iter.Seq2[uint64, bool] {
	return func(yield func(conn uint64, wrote bool) bool) {
		var conn uint64
		got, wrote := false, false // an attempt is open (a GotConn not yet followed by a GetConn); it wrote its headers
		for i := range tl.Events {
			e := &tl.Events[i]
			if e.Late {
				continue
			}
			switch e.Kind {
			case vocab.KindGotConn:
				got, conn, wrote = true, e.Conn, false
			case vocab.KindWroteHeaders:
				wrote = true
			case vocab.KindGetConn:
				if got && !yield(conn, wrote) {
					return
				}
				got = false
			}
		}
	}
}
