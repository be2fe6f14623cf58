package httptrace_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// TestHTTP2Timeline: over HTTP/2 the Transport never calls PutIdleConn, yet
// the timeline is complete and finished by the body's Close, for a body read
// to EOF and for one closed early; the later requests share the first one's
// connection.
func TestHTTP2Timeline(t *testing.T) {
	payload := strings.Repeat("h2", 32<<10)
	srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, payload)
	}), true)
	dc := &dialCounter{}
	base := newBase(t, &http.Transport{TLSClientConfig: trust(srv), ForceAttemptHTTP2: true, DialContext: dc.DialContext})
	tr, c := traced(t, base, nil)

	fetch(t, tr, srv.URL+"/a")
	fetch(t, tr, srv.URL+"/b")
	resp, err := tr.RoundTrip(newRequest(t, guardCtx(t), http.MethodGet, srv.URL+"/early", nil))
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 3))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	// A fourth request: the early close reset only its stream, not the connection.
	fetch(t, tr, srv.URL+"/d")
	assert.Equal(t, int64(1), dc.dials.Load())

	// HTTP/2 writes a request on a goroutine of its own, which may report
	// wrote-headers and wrote-request after the response was read and the
	// body closed: those events are late, and stay with their request.
	written := func(tls []*httptrace.Timeline, late []httptrace.LateEvent) map[uint64]map[httptrace.Kind]int {
		m := map[uint64]map[httptrace.Kind]int{}
		for _, tl := range tls {
			m[tl.ID] = map[httptrace.Kind]int{
				vocab.KindWroteHeaders: tl.Count(vocab.KindWroteHeaders),
				vocab.KindWroteRequest: tl.Count(vocab.KindWroteRequest),
			}
		}
		for _, le := range late {
			if m[le.Timeline] != nil {
				m[le.Timeline][le.Event.Kind]++
			}
		}
		return m
	}
	require.NoError(t, c.Wait(guardCtx(t), func(tls []*httptrace.Timeline, late []httptrace.LateEvent) bool {
		if len(tls) < 4 {
			return false
		}
		for _, k := range written(tls, late) {
			if k[vocab.KindWroteHeaders] == 0 || k[vocab.KindWroteRequest] == 0 {
				return false
			}
		}
		return true
	}), "every request's write reported")

	tls := c.Timelines()
	require.Len(t, tls, 4)
	late := c.Late()
	for id, k := range written(tls, late) {
		assert.Equal(t, map[httptrace.Kind]int{vocab.KindWroteHeaders: 1, vocab.KindWroteRequest: 1}, k, "timeline %d", id)
	}
	for _, le := range late {
		switch le.Event.Kind {
		case vocab.KindWroteHeaders, vocab.KindWroteRequest:
		default:
			t.Errorf("unexpected late %s", le.Event.Kind)
		}
	}
	for i, tl := range tls {
		assert.Equal(t, "HTTP/2.0", tl.Proto)
		assert.Equal(t, http.StatusOK, tl.Status)
		assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
		assert.Equal(t, vocab.StageBody, tl.Outcome.Stage)
		assert.True(t, tl.BodyClosed)
		assert.Equal(t, uint64(1), tl.Conn.ID)
		requireCounts(t, tl, map[httptrace.Kind]int{
			vocab.KindGetConn: 1, vocab.KindGotConn: 1, vocab.KindFirstByte: 1, vocab.KindResponse: 1,
			vocab.KindBodyClose: 1, vocab.KindDone: 1, vocab.KindPutIdleConn: 0,
		})
		assert.Equal(t, len(tl.Events)-1, index(tl, vocab.KindDone, -1), "done is last: %v", kindsOf(tl))
		if i == 0 {
			assert.True(t, tl.Conn.New())
			assert.True(t, tl.TLS.Done)
			assert.Equal(t, "h2", tl.TLS.ALPN)
			requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindConnectDone: 1, vocab.KindTLSStart: 1, vocab.KindTLSDone: 1})
		} else {
			assert.False(t, tl.Conn.New(), "request %d", i)
			assert.True(t, tl.Conn.Reused)
			requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindConnectStart: 0, vocab.KindTLSStart: 0})
		}
	}
	for _, i := range []int{0, 1, 3} {
		tl := tls[i]
		assert.True(t, tl.BodyEOF)
		assert.False(t, tl.ClosedEarly)
		assert.Equal(t, int64(len(payload)), tl.BodyBytes)
		assert.Equal(t, 1, tl.Count(vocab.KindBodyEOF))
	}
	early := tls[2]
	assert.True(t, early.ClosedEarly)
	assert.False(t, early.BodyEOF)
	assert.Equal(t, int64(3), early.BodyBytes)
	assert.Equal(t, 0, early.Count(vocab.KindBodyEOF))
}
