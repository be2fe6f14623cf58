package probe

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// tlsConn returns a TLS connection dialed at dial, whose TCP connection was
// up at up and whose handshake finished at done (offsets from t0).
func tlsConn(t0 time.Time, id uint64, dial, up, done time.Duration, resumed bool) pool.Conn {
	return pool.Conn{
		ID: id, Proto: "h2", TLSVersion: "TLS 1.3", TLSResumed: resumed, Requests: 1,
		DialedAt: t0.Add(dial),
		History: []pool.StateChange{
			{State: vocab.StateDialing, At: t0.Add(dial)},
			{State: vocab.StateHandshake, At: t0.Add(up)},
			{State: vocab.StateIdle, At: t0.Add(done)},
		},
	}
}

func newEvidence() *evidence {
	return &evidence{conns: map[uint64]*connTally{}, unconnected: map[uint64]bool{}, unconnectedAll: true}
}

// TestResumable checks that a connection dialed while another's handshake
// was in progress counts as able to resume when its own handshake began
// after the other's finished, and that no more connections resumed than
// could.
func TestResumable(t *testing.T) {
	t0 := time.Now()
	ms := time.Millisecond
	cases := []struct {
		name               string
		conns              []pool.Conn
		resumed, resumable int
	}{
		// #2 was dialed before #1's handshake finished, but its own began
		// after: it resumed #1's session.
		{"dialed during, handshake after", []pool.Conn{
			tlsConn(t0, 1, 0, 1*ms, 5*ms, false),
			tlsConn(t0, 2, 1*ms, 6*ms, 7*ms, true),
		}, 1, 1},
		// Both handshakes began before either finished: none could.
		{"concurrent handshakes", []pool.Conn{
			tlsConn(t0, 1, 0, 1*ms, 5*ms, false),
			tlsConn(t0, 2, 0, 2*ms, 6*ms, false),
		}, 0, 0},
		// A connection that resumed could resume, whatever the times say.
		{"resumed counts", []pool.Conn{
			tlsConn(t0, 1, 0, 1*ms, 5*ms, false),
			tlsConn(t0, 2, 0, 2*ms, 6*ms, true),
		}, 1, 1},
		// One began after #1 finished and did not resume.
		{"could, did not", []pool.Conn{
			tlsConn(t0, 1, 0, 1*ms, 5*ms, false),
			tlsConn(t0, 2, 6*ms, 7*ms, 9*ms, false),
		}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Result{}
			fillConns(rep, tc.conns, len(tc.conns), newEvidence())
			require.NotNil(t, rep.TLS)
			require.Equal(t, tc.resumed, rep.TLS.Resumed)
			require.Equal(t, tc.resumable, rep.TLS.Resumable)
			require.GreaterOrEqual(t, rep.TLS.Resumable, rep.TLS.Resumed)
		})
	}
}

// TestDialAbandoned checks that a dial or TLS handshake the Transport
// abandoned (the pool marks it) for a request that did not fail counts as
// abandoned, not failed; that one abandoned for a request that failed
// before it got a connection counts as failed; and that a dial that failed
// by itself counts as failed whatever its error says. The pool's own tests
// force both abandonments against real sockets.
func TestDialAbandoned(t *testing.T) {
	const cancelled = "dial tcp 127.0.0.1:8080: operation was canceled"
	conns := []pool.Conn{
		{ID: 1, Proto: "HTTP/1.1", Requests: 2, DialedFor: 10},
		{ID: 2, DialedFor: 11, DialError: cancelled, Abandoned: true},
		{ID: 3, DialedFor: 12, DialError: cancelled, Abandoned: true},
		{ID: 4, DialedFor: 13, DialError: "dial tcp 127.0.0.1:8080: connect: connection refused"},
		{ID: 5, DialedFor: 14, DialError: cancelled}, // the user's own dialer cancelled it
		{ID: 6, DialedFor: 15, State: vocab.StateClosed, ClosedBy: vocab.ClosedByClient,
			CloseReason: vocab.ReasonHandshakeAbandon, Abandoned: true},
	}
	ev := newEvidence()
	ev.conns[1] = &connTally{answered: 2}
	ev.unconnected[12] = true // its request failed while its dial went on
	ev.unconnected[13] = true
	rep := &Result{Dials: 6, DialErrors: 4}
	fillConns(rep, conns, 6, ev)
	require.EqualValues(t, 3, rep.DialErrors)
	require.EqualValues(t, 2, rep.DialsAbandoned)
	require.True(t, rep.Connections[1].DialAbandoned)
	require.Empty(t, rep.Connections[1].DialError)
	require.False(t, rep.Connections[2].DialAbandoned)
	require.Equal(t, cancelled, rep.Connections[2].DialError)
	require.NotEmpty(t, rep.Connections[3].DialError)
	require.False(t, rep.Connections[4].DialAbandoned)
	require.Equal(t, cancelled, rep.Connections[4].DialError)
	require.True(t, rep.Connections[5].DialAbandoned)
	require.Equal(t, vocab.ReasonHandshakeAbandon, rep.Connections[5].CloseReason)
	require.Equal(t, []any{2, 2, 2.0}, []any{rep.PerConn.Min, rep.PerConn.Max, rep.PerConn.Mean})

	t.Run("times", func(t *testing.T) {
		// Each connection's dial, first use and close, as the pool's.
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		c := pool.Conn{ID: 7, Requests: 1, DialedAt: t0, FirstUsedAt: t0.Add(time.Millisecond), ClosedAt: t0.Add(time.Second)}
		rep := &Result{}
		fillConns(rep, []pool.Conn{c}, 1, newEvidence())
		got := rep.Connections[0]
		require.Equal(t, []time.Time{c.DialedAt, c.FirstUsedAt, c.ClosedAt}, []time.Time{got.DialedAt, got.FirstUsedAt, got.ClosedAt})
	})

	t.Run("past the bound", func(t *testing.T) {
		// Once too many requests failed to know them all, any of them
		// may have cancelled a dial: it counts as failed.
		ev := newEvidence()
		ev.unconnectedAll = false
		rep := &Result{Dials: 1, DialErrors: 1}
		fillConns(rep, conns[1:2], 1, ev)
		require.EqualValues(t, 1, rep.DialErrors)
		require.Zero(t, rep.DialsAbandoned)
	})
}

// ids returns the ids from..to, both included, stepping by step.
func ids(from, to, step uint64) []uint64 {
	var out []uint64
	for id := from; id <= to; id += step {
		out = append(out, id)
	}
	return out
}

// TestIDList checks that non-contiguous connection ids are listed, up to
// a bound in runs and in width, as idList's comment says.
func TestIDList(t *testing.T) {
	for name, tc := range map[string]struct {
		ids  []uint64
		want string
	}{
		"one":        {[]uint64{3}, "#3"},
		"run":        {[]uint64{1, 2, 3, 4}, "#1-#4"},
		"two":        {[]uint64{1, 3}, "#1,#3 (2)"},
		"run and id": {[]uint64{1, 2, 3, 7}, "#1-#3,#7 (4)"},
		"bounded":    {[]uint64{1, 3, 5, 7, 9, 11}, "#1,#3,#5,#7,… (6)"},
		"wide ids":   {ids(1001, 1079, 2), "#1001,#1003,#1005,… (40)"},
		"wide runs": {append(append(ids(1001, 1002, 1), ids(1004, 1005, 1)...), ids(1007, 1100, 2)...),
			"#1001-#1002,… (51)"},
		"wide, within the runs bound": {[]uint64{100001, 100003, 100005}, "#100001,#100003,… (3)"},
		"one wide run":                {ids(100000000, 100000999, 1), "#100000000-#100000999"},
		"first run too wide": {append(ids(100000000, 100000999, 1), ids(100002000, 100002999, 1)...),
			"#100000000,… (2000)"},
		"huge ids": {[]uint64{1 << 63, 1<<63 + 2}, "#9223372036854775808,… (2)"},
	} {
		got := idList(tc.ids)
		require.Equal(t, tc.want, got, name)
		if len(tc.ids) < 1e8 && tc.ids[0] < 1e9 {
			require.LessOrEqual(t, utf8.RuneCountInString(got), idListWidth, name)
		}
	}
}

// TestOneResponseEachWithTheLastClosedByTheProbe: a server that closes
// each connection after one response, whose last close the probe's own
// end beat, keeps no connection alive all the same; one connection the
// probe closed says nothing either way; a connection that served two does.
func TestOneResponseEachWithTheLastClosedByTheProbe(t *testing.T) {
	server := Connection{Responses: 1, ClosedBy: vocab.ClosedByServer, CloseReason: vocab.ReasonServerClosedIdle}
	probeEnd := Connection{Responses: 1, ClosedBy: vocab.ClosedByClient, CloseReason: vocab.ReasonCloseIdle}
	two := Connection{Responses: 2, ClosedBy: vocab.ClosedByClient, CloseReason: vocab.ReasonCloseIdle}
	require.True(t, allOneAndServerClosed([]Connection{server, server, server, probeEnd}, 0))
	require.False(t, allOneAndServerClosed([]Connection{probeEnd}, 0))
	require.False(t, allOneAndServerClosed([]Connection{server, two}, 0))
	require.True(t, allOneAndServerClosed([]Connection{server}, 0))
}
