package pool_test

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// TestOnConnClose checks that the hook sees every connection close once,
// closed, with its side and reason, and no failed dial: the same closes
// that Stats counts.
func TestOnConnClose(t *testing.T) {
	var n atomic.Int64
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%2 == 0 {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	closes := make(chan pool.Conn, 16)
	p := newPool(t, pool.OnConnClose(func(c pool.Conn) { closes <- c }))

	// A refused dial is no connection: not reported.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, refused, nil)
	require.NoError(t, err)
	_, err = p.Client().Do(req)
	require.Error(t, err)

	// Four requests, two per connection, the second answered with
	// "Connection: close"; then a fifth, whose connection goes idle and
	// is closed by CloseIdleConnections.
	for range 5 {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	quiesce(t, p)
	p.CloseIdleConnections()
	waitStats(t, p, "three closes", func(s pool.Stats) bool { return s.Closed == 3 })

	reasons := map[pool.CloseReason]int{}
	ctx := bounded(t)
	for range 3 {
		select {
		case c := <-closes:
			require.Equal(t, vocab.StateClosed, c.State)
			require.False(t, c.ClosedAt.IsZero())
			require.False(t, c.ClosedAt.Before(c.DialedAt))
			require.Equal(t, "HTTP/1.1", c.Proto)
			reasons[c.CloseReason]++
		case <-ctx.Done():
			t.Fatalf("OnConnClose: %v after %v", ctx.Err(), reasons)
		}
	}
	require.Equal(t, map[pool.CloseReason]int{
		vocab.ReasonConnectionClose: 2,
		vocab.ReasonCloseIdle:       1,
	}, reasons)
	s := p.Stats()
	require.EqualValues(t, 1, s.DialErrors)
	require.Equal(t, map[pool.CloseReason]int64{vocab.ReasonConnectionClose: 2, vocab.ReasonCloseIdle: 1}, s.ClosedBy)
	select {
	case c := <-closes:
		t.Fatalf("a fourth close reported: %+v", c)
	default:
	}
}

func TestOnConnCloseNil(t *testing.T) {
	_, err := pool.New(pool.OnConnClose(nil))
	require.ErrorContains(t, err, "nil OnConnClose")
	_, err = pool.Track(&http.Transport{}, pool.OnConnClose(nil))
	require.Error(t, err)
}
