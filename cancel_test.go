package connaudit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// bounded returns a context that ends after testkit.WaitBound or with the test.
func bounded(t *testing.T) context.Context { return testkit.Bounded(t) }

// newServer starts a fault server with /ok and the given faults.
func newServer(t *testing.T, faults map[string]faultserver.Fault, opts ...faultserver.Option) *faultserver.Server {
	t.Helper()
	srv, err := faultserver.New(opts...)
	require.NoError(t, err)
	srv.Handle("/ok", faultserver.OK{})
	for path, f := range faults {
		srv.Handle(path, f)
	}
	return srv
}

// newPool returns a single-connection pool that records timelines in col
// and signals each request written on wrote (when not nil).
func newPool(t *testing.T, col *httptrace.Collector, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New(append([]pool.Option{pool.MaxConnsPerHost(1), pool.WithObserver(col), pool.CaptureStacks()}, opts...)...)
	require.NoError(t, err)
	return p
}

// wroteSignal is an EventObserver that signals each request written.
type wroteSignal struct {
	httptrace.Collector
	wrote chan struct{}
}

func newWroteSignal() *wroteSignal { return &wroteSignal{wrote: make(chan struct{}, 16)} }

func (w *wroteSignal) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	w.Collector.ObserveEvent(tl, ev)
	if ev.Kind == vocab.KindWroteRequest && !ev.Late {
		w.wrote <- struct{}{}
	}
}

func get(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// getAll makes a GET and reads and closes the body.
func getAll(ctx context.Context, c *http.Client, url string) (int, string, error) {
	resp, err := get(ctx, c, url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// requireRecovered asserts that the same pool serves /ok of srv and that
// nothing is left behind: no open body, no active connection, no goroutine.
func requireRecovered(t *testing.T, p *pool.Pool, srv *faultserver.Server) {
	t.Helper()
	code, body, err := getAll(bounded(t), p.Client(), srv.URL()+"/ok")
	require.NoError(t, err, "the pool must serve /ok after the fault")
	require.Equal(t, 200, code)
	require.Equal(t, "ok", body)
	require.NoError(t, p.Check(bounded(t)))
	require.NoError(t, p.Stats().Check())
	require.Zero(t, p.Stats().Active)
	require.Zero(t, p.Stats().OpenBodies)
	p.CloseIdleConnections()
	require.NoError(t, srv.Close())
}

// requireCanceledAt requires that exactly one finished timeline is for
// path, and that it was cancelled in stage; it returns that timeline.
func requireCanceledAt(t *testing.T, col *httptrace.Collector, path string, stage httptrace.Stage) *httptrace.Timeline {
	t.Helper()
	var tls []*httptrace.Timeline
	for _, tl := range col.Timelines() {
		if u := tl.RawURL(); u.Path == path {
			tls = append(tls, tl)
		}
	}
	require.Len(t, tls, 1)
	require.Equal(t, vocab.ClassCanceled, tls[0].Outcome.Class)
	require.Equal(t, stage, tls[0].Outcome.Stage)
	return tls[0]
}

func TestCancelWhileWaitingForTheConnection(t *testing.T) {
	for _, proto := range []string{"http1"} { // HTTP/2 multiplexes: nobody waits
		t.Run(proto, func(t *testing.T) {
			srv := newServer(t, map[string]faultserver.Fault{"/hang": faultserver.Hang{}})
			col := &httptrace.Collector{}
			p := newPool(t, col)

			hctx, hcancel := context.WithCancel(bounded(t))
			hdone := make(chan error, 1)
			go func() { _, _, err := getAll(hctx, p.Client(), srv.URL()+"/hang"); hdone <- err }()
			<-srv.Entered("/hang")

			wctx, wcancel := context.WithCancel(bounded(t))
			wdone := make(chan error, 1)
			go func() { _, _, err := getAll(wctx, p.Client(), srv.URL()+"/ok"); wdone <- err }()
			require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Waiting == 1 }))
			wcancel()
			require.ErrorIs(t, <-wdone, context.Canceled)

			requireCanceledAt(t, col, "/ok", vocab.StagePoolWait)
			require.Zero(t, srv.Counters("/ok").RequestsRead, "the server never saw the cancelled request")

			hcancel()
			require.ErrorIs(t, <-hdone, context.Canceled)
			awaitCancel(t, srv, "/hang")
			requireRecovered(t, p, srv)
			require.EqualValues(t, 2, p.Stats().Dials, "the hanging request's connection was closed by its cancel")
		})
	}
}

func TestCancelDuringHangingConnect(t *testing.T) {
	srv := newServer(t, nil)
	hang, err := faultserver.NewConnectHang()
	require.NoError(t, err)
	defer hang.Close()
	col := &httptrace.Collector{}
	p := newPool(t, col) // the connect bound is the default 30s: only the cancel ends the dial

	ctx, cancel := context.WithCancel(bounded(t))
	done := make(chan error, 1)
	go func() { _, _, err := getAll(ctx, p.Client(), hang.URL()+"/x"); done <- err }()
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Dialing == 1 }))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	requireCanceledAt(t, col, "/x", vocab.StageConnect)

	// The dial goes on in the background (net/http detaches it from the
	// request) until its own bound: closing the listener ends it.
	require.NoError(t, hang.Close())
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Dialing == 0 }))
	requireRecovered(t, p, srv)
}

func TestCancelDuringStalledTLSHandshake(t *testing.T) {
	srv := newServer(t, nil)
	stall, err := faultserver.NewTLSStall()
	require.NoError(t, err)
	col := &httptrace.Collector{}
	p := newPool(t, col) // TLSHandshakeTimeout is the default 10s: only the cancel ends the request

	ctx, cancel := context.WithCancel(bounded(t))
	done := make(chan error, 1)
	go func() { _, _, err := getAll(ctx, p.Client(), stall.URL()+"/x"); done <- err }()
	<-stall.Accepted()
	// Wait until the client, too, has its TCP connection: the pool's dial
	// returned and the handshake is pending.
	require.NoError(t, p.WaitFor(bounded(t), func(pool.Stats) bool {
		for _, c := range p.Conns() {
			if c.State == vocab.StateHandshake {
				return true
			}
		}
		return false
	}))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	requireCanceledAt(t, col, "/x", vocab.StageTLS)

	// The handshake goes on in the background; closing the stalled server
	// ends it: the server closed that connection, mid-handshake.
	require.NoError(t, stall.Close())
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Dialing == 0 && s.Closed == 1 }))
	conns := p.Conns()
	require.Len(t, conns, 1)
	require.Equal(t, vocab.ClosedByServer, conns[0].ClosedBy)
	// A close with the ClientHello unread is a reset; without, an EOF.
	require.Contains(t, []pool.CloseReason{vocab.ReasonServerEOF, vocab.ReasonServerReset}, conns[0].CloseReason)
	requireRecovered(t, p, srv)
}

func TestCancelAfterHandlerEntered(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
	}{{"http1", nil}, {"h2", []faultserver.Option{faultserver.TLS()}}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, map[string]faultserver.Fault{"/hang": faultserver.Hang{}}, tc.opts...)
			sig := newWroteSignal()
			opts := []pool.Option{pool.WithObserver(sig)}
			if cfg := srv.ClientTLSConfig(); cfg != nil {
				opts = append(opts, pool.TLSClientConfig(cfg))
			}
			p, err := pool.New(append(opts, pool.MaxConnsPerHost(1))...)
			require.NoError(t, err)
			col := &sig.Collector
			ctx, cancel := context.WithCancel(bounded(t))
			done := make(chan error, 1)
			go func() { _, _, err := getAll(ctx, p.Client(), srv.URL()+"/hang"); done <- err }()
			<-srv.Entered("/hang")
			<-sig.wrote // the client, too, knows the request is written
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			awaitCancel(t, srv, "/hang")
			require.EqualValues(t, 1, srv.Counters("/hang").CancelsObserved)
			requireCanceledAt(t, col, "/hang", vocab.StageAwaitHeaders)
			if tc.name == "h2" {
				conns := p.Conns()
				require.NotEmpty(t, conns)
				require.Equal(t, "h2", conns[0].Proto, "the h2 case runs over HTTP/2")
			}
			requireRecovered(t, p, srv)
		})
	}
}

func TestCancelDuringBodyRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
	}{{"http1", nil}, {"h2", []faultserver.Option{faultserver.TLS()}}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, map[string]faultserver.Fault{"/stall": faultserver.StallMidBody{Length: 1000, Send: 100}}, tc.opts...)
			col := &httptrace.Collector{}
			var opts []pool.Option
			if cfg := srv.ClientTLSConfig(); cfg != nil {
				opts = append(opts, pool.TLSClientConfig(cfg))
			}
			p := newPool(t, col, opts...)
			ctx, cancel := context.WithCancel(bounded(t))
			resp, err := get(ctx, p.Client(), srv.URL()+"/stall")
			require.NoError(t, err)
			if tc.name == "h2" {
				require.Equal(t, 2, resp.ProtoMajor, "the h2 case runs over HTTP/2")
			}
			buf := make([]byte, 100)
			_, err = io.ReadFull(resp.Body, buf)
			require.NoError(t, err)
			cancel()
			_, err = io.ReadAll(resp.Body)
			require.Error(t, err)
			require.True(t, errors.Is(err, context.Canceled), "got %v", err)
			require.NoError(t, resp.Body.Close())
			awaitCancel(t, srv, "/stall")
			tl := requireCanceledAt(t, col, "/stall", vocab.StageBody)
			require.EqualValues(t, 100, tl.BodyBytes)
			requireRecovered(t, p, srv)
		})
	}
}

// awaitCancel waits until the server observed the client leave path,
// failing the test past testserver.AwaitBound.
func awaitCancel(t *testing.T, s *faultserver.Server, path string) {
	t.Helper()
	testserver.Await(t, s.CancelObserved(path), "the server's observing the client leave "+path)
}
