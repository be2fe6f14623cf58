package attempts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/vocab"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestAbandoned: each attempt followed by another GetConn is yielded, with
// its connection and whether its headers were written; the last attempt,
// a GetConn with no attempt open (HTTP/2 asks twice) and late events are
// not; a loop may stop early.
func TestAbandoned(t *testing.T) {
	ev := func(k httptrace.Kind, conn uint64) httptrace.Event { return httptrace.Event{Kind: k, Conn: conn} }
	late := ev(vocab.KindGetConn, 0)
	late.Late = true
	tl := &httptrace.Timeline{Events: []httptrace.Event{
		ev(vocab.KindGetConn, 0), ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindWroteHeaders, 1),
		ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 2),
		ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 3), ev(vocab.KindWroteHeaders, 3), late,
	}}
	type attempt struct {
		conn  uint64
		wrote bool
	}
	var got []attempt
	for conn, wrote := range Abandoned(tl) {
		got = append(got, attempt{conn, wrote})
	}
	require.Equal(t, []attempt{{1, true}, {2, false}}, got)
	n := 0
	for range Abandoned(tl) {
		n++
		break
	}
	require.Equal(t, 1, n)
	for range Abandoned(&httptrace.Timeline{}) {
		t.Fatal("no events, no attempt")
	}
}
