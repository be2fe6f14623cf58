package httptrace_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// TestRecyclingNeverCorrupts sends many requests in a row on one keep-alive
// connection, so the Transport recycles its recorders, while abusing the
// bodies: each is closed twice, read after Close, and the previous body is
// closed and read again while the next request is in flight. Every 7th body
// is closed before EOF, which costs the connection. Each timeline must still
// be exactly its own request's.
func TestRecyclingNeverCorrupts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []httptrace.Option
	}{
		{"plain", nil},
		{"with body watchdog and headers", []httptrace.Option{httptrace.BodyIdleTimeout(guard), httptrace.Headers("X-Req")}},
	} {
		t.Run(tc.name, func(t *testing.T) { testRecycling(t, tc.opts) })
	}
}

// closesOnEarlyClose: Go 1.26 closes an HTTP/1 connection whose body is
// closed before EOF; a later Go may drain it instead.
var closesOnEarlyClose = strings.HasPrefix(runtime.Version(), "go1.26")

func bodyFor(i int) string { return strings.Repeat(strconv.Itoa(i%10), 100+i) }

func testRecycling(t *testing.T, opts []httptrace.Option) {
	const n = 60
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		w.WriteHeader(200 + i%3)
		io.WriteString(w, bodyFor(i))
	}))
	dc := &dialCounter{}
	base := newBase(t, &http.Transport{DialContext: dc.DialContext, MaxConnsPerHost: 1})
	tr, c := traced(t, base, nil, opts...)
	ctx := guardCtx(t)

	var prev io.ReadCloser
	buf := make([]byte, 16)
	for i := range n {
		req := newRequest(t, ctx, http.MethodGet, fmt.Sprintf("%s/r/%d", srv.URL, i), nil)
		req.Header.Set("X-Req", strconv.Itoa(i))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		if prev != nil {
			// The previous request's body, whose recorder may now serve
			// this request: Close and Read must not touch it.
			assert.NoError(t, prev.Close())
			nr, err := prev.Read(buf)
			assert.Zero(t, nr)
			assert.Error(t, err, "read after close")
		}
		if i%7 == 3 {
			_, err = io.ReadFull(resp.Body, buf[:5])
			require.NoError(t, err)
		} else {
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, bodyFor(i), string(b))
		}
		require.NoError(t, resp.Body.Close())
		resp.Body.Close() // twice
		nr, err := resp.Body.Read(buf)
		assert.Zero(t, nr)
		assert.Error(t, err, "read after close")
		prev = resp.Body
	}
	prev.Close()

	tls := waitTimelines(t, c, n)
	require.Len(t, tls, n, "one timeline per request, no more")
	ids := map[uint64]bool{}
	dials := 0
	for i, tl := range tls {
		assert.False(t, ids[tl.ID], "id %d reused", tl.ID)
		ids[tl.ID] = true
		u, err := url.Parse(tl.URL())
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("/r/%d", i), u.Path, "timelines finish in request order")
		assert.Equal(t, 200+i%3, tl.Status)
		assert.Equal(t, 200+i%3, tl.Outcome.Status)
		assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
		assert.Equal(t, 1, tl.GetConns)
		closedEarly := i%7 == 3
		assert.Equal(t, closedEarly, tl.ClosedEarly, "request %d", i)
		assert.Equal(t, !closedEarly, tl.BodyEOF, "request %d", i)
		if closedEarly {
			assert.Equal(t, int64(5), tl.BodyBytes)
		} else {
			assert.Equal(t, int64(len(bodyFor(i))), tl.BodyBytes)
		}
		if len(opts) > 0 {
			assert.Equal(t, map[string]string{"X-Req": strconv.Itoa(i)}, tl.Header)
		}
		eof := 1
		if closedEarly {
			eof = 0
		}
		requireCounts(t, tl, map[httptrace.Kind]int{
			vocab.KindGetConn: 1, vocab.KindGotConn: 1, vocab.KindWroteHeaders: 1, vocab.KindWroteRequest: 1,
			vocab.KindFirstByte: 1, vocab.KindResponse: 1, vocab.KindBodyEOF: eof, vocab.KindPutIdleConn: eof,
			vocab.KindBodyClose: 1, vocab.KindDone: 1,
		})
		for _, e := range tl.Events {
			assert.False(t, e.Late, "request %d: late %s", i, e.Kind)
		}
		if !closesOnEarlyClose {
			continue
		}
		fresh := i == 0 || (i-1)%7 == 3 // after an early close the next request dials
		if fresh {
			dials++
		}
		assert.Equal(t, fresh, tl.Conn.New(), "request %d: new connection", i)
		assert.Equal(t, !fresh, tl.Conn.WasIdle, "request %d", i)
		assert.Equal(t, fresh, tl.Count(vocab.KindConnectDone) == 1, "request %d dials", i)
	}
	assert.Empty(t, c.Late())
	if closesOnEarlyClose {
		assert.Equal(t, int64(dials), dc.dials.Load(), "one dial, plus one after each early close")
	}
}
