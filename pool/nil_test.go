package pool_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// closeTracker is a request body that records its Close.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error {
	c.closed.Store(true)
	return nil
}

// TestNilPool: every method of a nil *Pool returns an error or zero values,
// never panics; its client and RoundTripper refuse every request (closing
// its body), none of which reaches the server.
func TestNilPool(t *testing.T) {
	var served atomic.Int64
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served.Add(1) }))
	var p *pool.Pool
	ctx := bounded(t)

	require.Zero(t, p.Stats())
	require.Nil(t, p.HostStats())
	require.Nil(t, p.Conns())
	_, ok := p.Conn(1)
	require.False(t, ok)
	require.Nil(t, p.OpenBodies())
	require.Zero(t, p.Snapshot())
	require.Nil(t, p.Transport())
	require.Zero(t, p.MaxConnsPerHost())
	p.CloseIdleConnections()
	p.Close()
	for name, err := range map[string]error{
		"Check":   p.Check(ctx),
		"Quiesce": p.Quiesce(ctx),
		"WaitFor": p.WaitFor(ctx, func(pool.Stats) bool { return true }),
		"Publish": p.Publish("connaudit-nil-pool"),
	} {
		require.ErrorContains(t, err, "nil *Pool", name)
	}
	_, err := p.Client().Get(srv.URL)
	require.ErrorContains(t, err, "nil *Pool")
	body := &closeTracker{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	require.NoError(t, err)
	_, err = p.RoundTripper().RoundTrip(req)
	require.ErrorContains(t, err, "nil *Pool")
	require.True(t, body.closed.Load(), "a RoundTripper closes the body, even on errors")
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, rec.Body.String(), "nil *Pool")
	require.Zero(t, served.Load())
}

// TestNilArguments: a nil context or condition is an error, not a panic.
func TestNilArguments(t *testing.T) {
	p := newPool(t)
	var nilCtx context.Context
	require.ErrorContains(t, p.WaitFor(bounded(t), nil), "nil condition")
	require.ErrorContains(t, p.WaitFor(nilCtx, func(pool.Stats) bool { return true }), "nil context")
	require.ErrorContains(t, p.Check(nilCtx), "nil context")
	require.ErrorContains(t, p.Quiesce(nilCtx), "nil context")
	_, err := pool.New(pool.WithObserver((*nilObserver)(nil)))
	require.ErrorContains(t, err, "nil observer")
}

type nilObserver struct{}

func (*nilObserver) Observe(*httptrace.Timeline) {}

// TestClosedPoolRefuses: after Close the pool refuses new requests with
// ErrClosed, which errors.Is finds through the Client's error, and none
// reaches the server; a request in flight at Close ends normally and its
// connection is then closed, not kept idle; the statistics still tell what
// the pool did; closing again is harmless.
func TestClosedPoolRefuses(t *testing.T) {
	var served atomic.Int64
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	}))
	p := newPool(t)
	ctx := bounded(t)
	require.Equal(t, "ok", get(t, p, srv.URL))
	inFlight := open(t, p, ctx, srv.URL) // its body open across Close
	p.Close()
	p.Close()

	_, err := p.Client().Get(srv.URL)
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorContains(t, err, "pool: closed")
	body := &closeTracker{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	require.NoError(t, err)
	_, err = p.RoundTripper().RoundTrip(req)
	require.True(t, errors.Is(err, pool.ErrClosed), "%v", err)
	require.True(t, body.closed.Load())

	b, err := io.ReadAll(inFlight.Body)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	require.NoError(t, inFlight.Body.Close())
	waitStats(t, p, "the in-flight request's connection closed", func(s pool.Stats) bool { return s.Open == 0 })
	s := p.Stats()
	require.EqualValues(t, 2, s.Requests, "the refused requests are not the pool's")
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, 1, s.ClosedBy[vocab.ReasonCloseIdle], "%v", s.ClosedBy)
	require.EqualValues(t, 2, served.Load())
	require.NoError(t, p.Check(ctx))
}
