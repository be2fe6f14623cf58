package pool

import (
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// BenchmarkObserve measures the pool's bookkeeping for one request on an
// idle HTTP/1 connection, fed the events the tracer reports for it, without
// the tracer, the Transport or sockets: the pool's own share of the hot
// path.
func BenchmarkObserve(b *testing.B) {
	p, err := New(MaxConnsPerHost(1), MaxIdleConnsPerHost(1))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	const host = "127.0.0.1:8080"
	now := time.Now()
	p.mu.Lock()
	c := &connState{Conn: Conn{ID: 1, Host: host}, io: new(connIO), hc: p.hostLocked(host)}
	c.setState(vocab.StateDialing, stampOf(now))
	p.conns[c.ID] = c
	p.openLocked(c, c.hc, stampOf(now))
	p.mu.Unlock()
	kinds := []httptrace.Kind{
		vocab.KindGetConn, vocab.KindGotConn, vocab.KindWroteHeaders, vocab.KindWroteRequest,
		vocab.KindFirstByte, vocab.KindResponse, vocab.KindPutIdleConn, vocab.KindBodyEOF,
		vocab.KindBodyClose, vocab.KindDone,
	}
	tl := &httptrace.Timeline{Method: "GET", Host: host, Start: now, Proto: "HTTP/1.1", Status: 200}
	tl.Conn.ID, tl.Conn.Reused, tl.Conn.WasIdle = c.ID, true, true
	b.ReportAllocs()
	for b.Loop() {
		tl.ID++
		for i, k := range kinds {
			observer{p}.ObserveEvent(tl, httptrace.Event{Kind: k, At: time.Duration(i+1) * time.Microsecond, Conn: c.ID})
		}
	}
	b.StopTimer()
	// Every request ended and left the connection idle.
	st := p.Stats()
	if st.InFlight != 0 || st.Idle != 1 || st.Active != 0 || st.OpenBodies != 0 || st.Requests != int64(b.N) {
		b.Fatalf("after %d requests: %+v", b.N, st)
	}
}
