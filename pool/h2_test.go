package pool_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

func TestHTTP2Streams(t *testing.T) {
	srv := newServer(t, tlsHTTP2, okHandler)
	col := &httptrace.Collector{}
	p := newPool(t, pool.TLSClientConfig(srv.trust()), pool.MaxConnsPerHost(1), pool.WithObserver(col))

	const n = 4
	type result struct {
		resp *http.Response
		err  error
	}
	results := make(chan result, n)
	ctx := bounded(t)
	for range n {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				results <- result{err: err}
				return
			}
			resp, err := p.Client().Do(req)
			results <- result{resp, err}
		}()
	}
	var resps []*http.Response
	defer func() {
		for _, r := range resps {
			r.Body.Close()
		}
	}()
	for range n {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, "HTTP/2.0", r.resp.Proto)
		resps = append(resps, r.resp)
	}

	// Every body is open: their streams keep the connection(s) active.
	quiesce(t, p)
	s := p.Stats()
	require.Equal(t, n, s.OpenBodies)
	require.EqualValues(t, n, s.Requests)
	require.Zero(t, s.Idle)
	require.Equal(t, s.Open, s.Active)
	active := 0
	for _, c := range p.Conns() {
		if c.State == vocab.StateClosed {
			continue
		}
		require.Equal(t, "h2", c.Proto)
		require.Equal(t, "TLS 1.3", c.TLSVersion)
		require.Equal(t, vocab.StateActive, c.State)
		active += len(c.Active)
	}
	require.Equal(t, n, active, "one active stream per open body")

	for _, r := range resps {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, "ok", string(b))
		require.NoError(t, r.Body.Close())
	}
	resps = nil
	quiesce(t, p)
	s = p.Stats()
	require.Zero(t, s.Active)
	require.Equal(t, s.Open, s.Idle)
	require.Zero(t, s.OpenBodies)
	require.Zero(t, s.InFlight)
	for _, c := range p.Conns() {
		if c.State != vocab.StateClosed {
			require.Equal(t, vocab.StateIdle, c.State)
			require.Empty(t, c.Active)
		}
	}

	// HTTP/2 does not honour MaxConnsPerHost as a cap: whatever it did,
	// the pool counted every connection the server accepted.
	require.NoError(t, srv.accepted.WaitAtLeast(bounded(t), s.Dials))
	require.EqualValues(t, srv.accepted.Load(), s.Dials)
	require.EqualValues(t, srv.accepted.Load(), s.MaxOpen)
	require.NoError(t, p.Check(bounded(t)))

	// Sequential requests multiplex on the idle connection.
	dials := s.Dials
	for range 3 {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	quiesce(t, p)
	require.Equal(t, dials, p.Stats().Dials)
	require.EqualValues(t, n+3, p.Stats().Requests)

	p.CloseIdleConnections()
	waitStats(t, p, "connections closed", func(s pool.Stats) bool { return s.Open == 0 })
	require.Equal(t, p.Stats().Closed, p.Stats().ClosedBy[vocab.ReasonCloseIdle])
	for _, tl := range col.Timelines() {
		require.Equal(t, vocab.ClassOK, tl.Outcome.Class)
	}
}

func TestHTTP2Disabled(t *testing.T) {
	srv := newServer(t, tlsHTTP2, okHandler)
	t.Run("New", func(t *testing.T) {
		p := newPool(t, pool.TLSClientConfig(srv.trust()), pool.Protocols(protocols(false)))
		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		require.Equal(t, "HTTP/1.1", onlyConn(t, p).Proto)
	})
	t.Run("Track", func(t *testing.T) {
		// The caller's transport attempts HTTP/2; the pool must not.
		base := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: srv.trust()}
		p, err := pool.Track(base, pool.Protocols(protocols(false)))
		require.NoError(t, err)
		t.Cleanup(p.Close)
		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		require.Equal(t, "HTTP/1.1", onlyConn(t, p).Proto)

		resp, err := (&http.Client{Transport: base}).Get(srv.URL)
		require.NoError(t, err)
		require.Equal(t, "HTTP/2.0", resp.Proto, "the caller's transport keeps HTTP/2")
		require.NoError(t, resp.Body.Close())
		base.CloseIdleConnections()
	})
}
