package probe

import (
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/stretchr/testify/require"
)

// TestJudgeRetry: a request whose earlier attempts wrote nothing was not
// processed the first time; one whose timeline lost its attempts may have
// been.
func TestJudgeRetry(t *testing.T) {
	a := newAggregator(t.Context(), false, time.Second, defaultMaxBody)
	ev := func(k httptrace.Kind, conn uint64) httptrace.Event { return httptrace.Event{Kind: k, Conn: conn} }
	tl := &httptrace.Timeline{Retries: 2, Events: []httptrace.Event{
		ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1),
		ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 2),
		ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 3), ev(vocab.KindWroteHeaders, 3),
	}}
	require.Equal(t, retryVerdict{rank: rankNotProcessed, why: whyNeverWritten}, a.judgeRetry(tl))

	// The headers of the first attempt were written, and no pool says
	// more: possibly processed.
	tl.Events = append([]httptrace.Event{ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindWroteHeaders, 1)}, tl.Events[2:]...)
	require.Equal(t, rankPossibly, a.judgeRetry(tl).rank)

	require.Equal(t, rankPossibly, a.judgeRetry(&httptrace.Timeline{Retries: 1}).rank, "no events")

	var r retryEvidence
	r.add(retryVerdict{rank: rankNotProcessed, why: whyNeverWritten})
	r.add(retryVerdict{rank: rankH2Written})
	r.add(retryVerdict{rank: rankH2Written})
	r.add(retryVerdict{rank: rankPendingIdle, idle: time.Second})
	r.add(retryVerdict{rank: rankPendingIdle, idle: 10 * time.Millisecond})
	var rep Result
	r.judge(&rep, time.Second, 1)
	require.Equal(t, map[string]int{whyNeverWritten: 1, whyH2Refused: 1, whyStaleIdle: 1}, rep.HiddenRetriesWhy)
	require.Equal(t, 3, rep.HiddenRetriesNotProcessed)
	require.Equal(t, 2, rep.HiddenRetriesPossiblyProcessed, "the short idle one and one reset with PROTOCOL_ERROR")
}
