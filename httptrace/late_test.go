package httptrace_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// holdListener holds every accepted connection until released: the client's
// TCP connect completes (the kernel accepts) but the TLS handshake hangs.
type holdListener struct {
	net.Listener
	release <-chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (l *holdListener) Accept() (net.Conn, error) {
	select {
	case <-l.release:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	return l.Listener.Accept()
}

func (l *holdListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// lateCase is the common part of the late-event tests: a request cancelled
// while its connection is being made, whose dial then completes in the
// background, and a second request served by that connection.
type lateCase struct {
	srv     *httptest.Server
	base    *http.Transport
	dials   *dialCounter
	c       *httptrace.Collector
	tr      *httptrace.Transport
	release chan struct{}
}

// cancelDuring sends a request, cancels it once the event kind `at` was
// recorded, and returns its timeline.
func (lc *lateCase) cancelDuring(t *testing.T, at <-chan struct{}) *httptrace.Timeline {
	t.Helper()
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		resp, err := lc.tr.RoundTrip(newRequest(t, ctx, http.MethodGet, lc.srv.URL+"/cancelled", nil))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, at, "the dial to begin")
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	tl := only(t, lc.c)
	assert.Equal(t, vocab.ClassCanceled, tl.Outcome.Class)
	assert.Same(t, err, tl.Outcome.Err)
	assert.Equal(t, 1, tl.Count(vocab.KindDone))
	assert.Equal(t, 0, tl.Count(vocab.KindGotConn))
	return tl
}

// finish releases the dial, waits for the late events, sends a second
// request and checks that the late events belong to the cancelled timeline
// only.
func (lc *lateCase) finish(t *testing.T, cancelled *httptrace.Timeline, wantLate ...httptrace.Kind) {
	t.Helper()
	close(lc.release)
	err := lc.c.Wait(guardCtx(t), func(_ []*httptrace.Timeline, late []httptrace.LateEvent) bool {
		for _, le := range late {
			if le.Event.Kind == vocab.KindTLSDone {
				return true
			}
		}
		return false
	})
	require.NoError(t, err, "late tls-done never arrived")

	late := lc.c.Late()
	got := map[httptrace.Kind]int{}
	for _, le := range late {
		assert.Equal(t, cancelled.ID, le.Timeline, "late %s attributed to timeline %d", le.Event.Kind, le.Timeline)
		assert.True(t, le.Event.Late)
		assert.NoError(t, le.Event.Err, "late %s", le.Event.Kind)
		got[le.Event.Kind]++
	}
	for _, k := range wantLate {
		assert.Equal(t, 1, got[k], "late %s events: %v", k, got)
	}

	// The connection the cancelled request dialed serves the next one,
	// which sees only get-conn and got-conn: no dial of its own.
	fetch(t, lc.tr, lc.srv.URL+"/next")
	tls := waitTimelines(t, lc.c, 2)
	require.Len(t, tls, 2)
	next := tls[1]
	assert.NotEqual(t, cancelled.ID, next.ID)
	assert.Equal(t, vocab.ClassOK, next.Outcome.Class)
	assert.Equal(t, int64(1), lc.dials.dials.Load(), "one dial in all")
	for _, e := range next.Events {
		assert.False(t, e.Late)
		switch e.Kind {
		case vocab.KindDNSStart, vocab.KindDNSDone, vocab.KindConnectStart, vocab.KindConnectDone,
			vocab.KindTLSStart, vocab.KindTLSDone:
			t.Errorf("the next request got a %s event of the cancelled request's dial", e.Kind)
		}
	}
	assert.False(t, next.Conn.Dialed)
	assert.Len(t, lc.c.Late(), len(late), "no more late events")
}

// TestLateHandshakeAfterCancel cancels a request while the server holds its
// TLS handshake; once released, the handshake completes in the background
// and its tls-done is recorded, late, on the cancelled request's timeline.
func TestLateHandshakeAfterCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = quietLog
	srv.Listener = &holdListener{Listener: srv.Listener, release: release, closed: make(chan struct{})}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dc := &dialCounter{}
	base := newBase(t, &http.Transport{TLSClientConfig: trust(srv), DialContext: dc.DialContext, MaxConnsPerHost: 1})
	sig := newSignals(vocab.KindTLSStart)
	tr, c := traced(t, base, []httptrace.Observer{sig})
	lc := &lateCase{srv: srv, base: base, dials: dc, c: c, tr: tr, release: release}

	tl := lc.cancelDuring(t, sig.on(vocab.KindTLSStart))
	assert.Equal(t, vocab.StageTLS, tl.Outcome.Stage)
	requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindConnectDone: 1, vocab.KindTLSStart: 1, vocab.KindTLSDone: 0})
	assert.False(t, tl.TLS.Done)

	lc.finish(t, tl, vocab.KindTLSDone)
}

// TestLateDialAfterCancel cancels a request while the base transport's
// DialContext is blocked before it reaches the network; once released, the
// whole dial (connect and TLS) runs in the background and is recorded, late,
// on the cancelled request's timeline.
func TestLateDialAfterCancel(t *testing.T) {
	srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), false)
	release := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	dc := &dialCounter{}
	blocking := func(ctx context.Context, network, addr string) (net.Conn, error) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done(): // CloseIdleConnections cancels pending dials
			return nil, ctx.Err()
		}
		return dc.DialContext(ctx, network, addr)
	}
	base := newBase(t, &http.Transport{TLSClientConfig: trust(srv), DialContext: blocking, MaxConnsPerHost: 1})
	tr, c := traced(t, base, nil)
	lc := &lateCase{srv: srv, base: base, dials: dc, c: c, tr: tr, release: release}

	tl := lc.cancelDuring(t, entered)
	// No hook fired before net.Dialer was reached: to the recorder the
	// request was still waiting for a connection.
	assert.Equal(t, vocab.StagePoolWait, tl.Outcome.Stage)
	requireCounts(t, tl, map[httptrace.Kind]int{vocab.KindGetConn: 1, vocab.KindConnectStart: 0})

	lc.finish(t, tl, vocab.KindConnectStart, vocab.KindConnectDone, vocab.KindTLSStart, vocab.KindTLSDone)
}
