package pool_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// TestHostStatsUseTheURLsHost checks that a request whose Host header
// differs from its URL counts under the host the Transport dials, with its
// connection, not under a host never dialed.
func TestHostStatsUseTheURLsHost(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	for range 2 {
		req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Host = "example.com"
		resp, err := p.Client().Do(req)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	quiesce(t, p)
	hs := p.HostStats()
	require.Len(t, hs, 1, "%v", hs)
	for _, s := range hs {
		require.EqualValues(t, 2, s.Requests)
		require.EqualValues(t, 1, s.Dials)
		require.EqualValues(t, 1, s.ReusedRequests)
		require.Equal(t, 1, s.Open)
	}
}

// TestRetriedRequestCountedOnce checks that a request the Transport sends
// twice (the server refused its first stream) is one request, on a
// connection that served one request, and not a reused one.
func TestRetriedRequestCountedOnce(t *testing.T) {
	s, err := faultserver.New(faultserver.RawHTTP2())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Handle("/refused", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{},
	}})
	col := &httptrace.Collector{}
	p := newPool(t, pool.TLSClientConfig(s.ClientTLSConfig()), pool.WithObserver(col))
	get(t, p, s.URL()+"/refused")
	quiesce(t, p)

	tls := col.Timelines()
	require.Len(t, tls, 1)
	require.Equal(t, 2, tls[0].GetConns, "the Transport asked for a connection twice")
	st := p.Stats()
	require.EqualValues(t, 1, st.Requests)
	require.EqualValues(t, 0, st.ReusedRequests)
	require.EqualValues(t, 1, st.WaitCount)
	c := onlyConn(t, p)
	require.Equal(t, 1, c.Requests)
	require.Equal(t, []uint64{tls[0].ID}, c.RequestIDs)
}

// TestH2StreamsBesideOthersDoNotWait checks that requests joining an open
// HTTP/2 connection beside other streams are not counted as waits: only
// the request that dialed it waited.
func TestH2StreamsBesideOthersDoNotWait(t *testing.T) {
	const n = 8
	gate := make(chan struct{})
	entered := make(chan struct{}, n)
	srv := newServer(t, tlsHTTP2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-gate
		}
		io.WriteString(w, "ok")
	}))
	p := newPool(t, pool.TLSClientConfig(srv.trust()), pool.MaxConnsPerHost(2), pool.MaxIdleConnsPerHost(2))
	get(t, p, srv.URL+"/warm")
	quiesce(t, p)

	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, srv.URL+"/slow", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := p.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	for range n {
		<-entered
	}
	require.Len(t, onlyConn(t, p).Active, n, "all streams on one connection")
	close(gate)
	wg.Wait()
	quiesce(t, p)

	s := p.Stats()
	require.EqualValues(t, n+1, s.Requests)
	require.EqualValues(t, 1, s.Dials)
	require.EqualValues(t, n, s.ReusedRequests)
	require.EqualValues(t, 1, s.WaitCount, "only the request that dialed waited")
}

// TestRequestEndedBeforeAskingForAConnection checks that a request whose
// context ended before the Transport asked for a connection still counts.
func TestRequestEndedBeforeAskingForAConnection(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	col := &httptrace.Collector{}
	p := newPool(t, pool.WithObserver(col))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = p.Client().Do(req)
	require.ErrorIs(t, err, context.Canceled)
	quiesce(t, p)

	tls := col.Timelines()
	require.Len(t, tls, 1)
	require.Zero(t, tls[0].GetConns, "no connection asked for")
	s := p.Stats()
	require.EqualValues(t, 1, s.Requests)
	require.Zero(t, s.InFlight)
	require.Zero(t, s.Dials)
	require.EqualValues(t, 1, p.HostStats()[srv.Listener.Addr().String()].Requests)
}

// TestIdleConnEvictedByMaxIdleConns checks the reason given for an idle
// connection the Transport closes to keep MaxIdleConns: not the idle
// timeout, which is a minute away.
func TestIdleConnEvictedByMaxIdleConns(t *testing.T) {
	s1 := newServer(t, plainHTTP, okHandler)
	s2 := newServer(t, plainHTTP, okHandler)
	p, err := pool.Track(&http.Transport{MaxIdleConns: 1, IdleConnTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	get(t, p, s1.URL)
	get(t, p, s2.URL)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	var closed []pool.Conn
	for _, c := range p.Conns() {
		if c.State == vocab.StateClosed {
			closed = append(closed, c)
		}
	}
	require.Len(t, closed, 1)
	require.Equal(t, s1.Listener.Addr().String(), closed[0].Host, "the least recently used")
	require.Equal(t, vocab.ClosedByClient, closed[0].ClosedBy)
	require.Equal(t, vocab.ReasonIdlePoolFull, closed[0].CloseReason)
}

// TestH2IdleTimeoutWhileBodyHeld checks the reason given for an HTTP/2
// connection that net/http's idle timer closes while the caller still
// holds a response body: the timer starts when the stream ends, not when
// the body is closed, so the client closed it, not the server.
func TestH2IdleTimeoutWhileBodyHeld(t *testing.T) {
	srv := newServer(t, tlsHTTP2, okHandler)
	p := newPool(t, pool.TLSClientConfig(srv.trust()), pool.IdleConnTimeout(150*time.Millisecond))
	resp := open(t, p, bounded(t), srv.URL)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the body came before the close")
	require.Equal(t, "ok", string(b))
	require.NoError(t, resp.Body.Close())
	quiesce(t, p)
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonIdleTimeout)
}

// TestH2ServerStageRecorded checks that every HTTP/2 GET has a server
// stage (headers written, or the connection got, to the first byte):
// net/http reports such a request written only after it let other streams
// start, often after the response was read, and its headers written may
// come after too.
func TestH2ServerStageRecorded(t *testing.T) {
	srv := newServer(t, tlsHTTP2, okHandler)
	col := &httptrace.Collector{}
	p := newPool(t, pool.TLSClientConfig(srv.trust()), pool.WithObserver(col))
	const n = 50
	for range n {
		require.Equal(t, "ok", get(t, p, srv.URL))
	}
	quiesce(t, p)
	tls := col.Timelines()
	require.Len(t, tls, n)
	inTime := 0
	for _, tl := range tls {
		// A round trip separates the connection and the first byte: the
		// span is never empty.
		require.Positive(t, tl.Timings().Server, "timeline %d: %v", tl.ID, tl.Events)
		for _, e := range tl.Events {
			if e.Kind == vocab.KindWroteHeaders && !e.Late {
				inTime++
			}
		}
	}
	t.Logf("%d of %d requests reported their headers written before they ended", inTime, n)
}

// TestSecretHeadersMasked checks that a header declared secret is masked
// in a timeline's error when a broken server quotes the request back.
func TestSecretHeadersMasked(t *testing.T) {
	const key = "apikey-SECRET-345"
	echo := testserver.Raw(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		var lines []string
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
			lines = append(lines, strings.TrimSpace(line))
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nEcho "+strings.Join(lines, " | ")+"\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	col := &httptrace.Collector{}
	p := newPool(t, pool.SecretHeaders("X-Api-Key"), pool.WithObserver(col))
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, "http://"+echo.Addr().String()+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", key)
	_, err = p.Client().Do(req)
	require.ErrorContains(t, err, key, "the raw error quotes the request")
	quiesce(t, p)
	tls := col.Timelines()
	require.Len(t, tls, 1)
	require.Equal(t, vocab.ClassProtocol, tls[0].Outcome.Class)
	msg := tls[0].RedactError(tls[0].Outcome.Err)
	require.NotContains(t, msg, key)
	require.Contains(t, msg, "X-Api-Key: "+redact.Masked)

	_, err = pool.New(pool.SecretHeaders(""))
	require.Error(t, err, "an empty name")
}

// TestTotalsAreTheHostsSums: the pool's totals are its hosts' numbers
// added up, but for MaxOpen, the most connections open at once in the
// whole pool, which no host's own peak gives: two connections to one host
// and one to another, open together, are a peak of 3 where each host's is
// at most 2 (and their sum, after both hosts' connections close and one
// host opens two again, would overcount).
func TestTotalsAreTheHostsSums(t *testing.T) {
	a := newServer(t, plainHTTP, okHandler)
	b := newServer(t, plainHTTP, okHandler)
	p := newPool(t, pool.MaxConnsPerHost(2), pool.MaxIdleConnsPerHost(2))
	open := func(url string) *http.Response {
		req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := p.Client().Do(req)
		require.NoError(t, err)
		return resp
	}
	sum := func() pool.Stats {
		var s pool.Stats
		for _, h := range p.HostStats() {
			s.Add(h)
		}
		return s
	}
	// Three bodies open at once: two connections to a, one to b.
	held := []*http.Response{open(a.URL), open(a.URL), open(b.URL)}
	st, hs := p.Stats(), sum()
	require.Equal(t, 3, st.Open)
	require.Equal(t, 3, st.OpenBodies)
	require.Equal(t, 3, st.InFlight)
	require.Equal(t, 3, st.MaxOpen, "the pool's peak")
	require.Equal(t, 2, hs.MaxOpen, "the largest host's peak")
	for _, r := range held {
		_, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
	}
	p.CloseIdleConnections()
	require.NoError(t, p.Quiesce(bounded(t)))
	waitStats(t, p, "every connection closed", func(s pool.Stats) bool { return s.Open == 0 })
	// Two again, to b alone: the peak stays 3, each host's is 2.
	held = []*http.Response{open(b.URL), open(b.URL)}
	for _, r := range held {
		_, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
	}
	quiesce(t, p)
	st, hs = p.Stats(), sum()
	require.Equal(t, 3, st.MaxOpen)
	for _, h := range p.HostStats() {
		require.Equal(t, 2, h.MaxOpen)
	}
	hs.MaxOpen = st.MaxOpen
	require.Equal(t, hs, st, "every other total is the hosts' sum")
	require.EqualValues(t, 5, st.Requests)
	require.EqualValues(t, 5, st.Dials)
	require.NoError(t, st.Check())
}

// TestTotalsOfOneHost: a pool of one host has that host's numbers as its
// totals (they are read without adding up), but for the scheme, which
// totals leave empty.
func TestTotalsOfOneHost(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	p := newPool(t)
	get(t, p, srv.URL)
	get(t, p, srv.URL)
	p.CloseIdleConnections()
	waitStats(t, p, "the connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	hs := p.HostStats()
	require.Len(t, hs, 1)
	for _, h := range hs {
		require.Equal(t, "http", h.Scheme)
		h.Scheme = ""
		require.Equal(t, h, p.Stats())
		var sum pool.Stats
		sum.Add(h)
		require.Equal(t, sum, p.Stats(), "as the sum of one host")
	}
}
