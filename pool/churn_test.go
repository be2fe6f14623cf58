package pool_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// churnEvents keeps the pool's churn warnings, and logs them through slog
// into a buffer.
type churnEvents struct {
	mu     sync.Mutex
	events []httptrace.Event
	log    bytes.Buffer
}

func (c *churnEvents) Observe(*httptrace.Timeline) {}

func (c *churnEvents) ObserveEvent(_ *httptrace.Timeline, ev httptrace.Event) {
	if ev.Kind != httptrace.KindIdlePoolChurn {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *churnEvents) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.Write(b)
}

// warnings returns the churn events seen and the slog records written.
func (c *churnEvents) warnings(t *testing.T) ([]httptrace.Event, []map[string]any) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var records []map[string]any
	for line := range strings.Lines(c.log.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["level"] == "WARN" {
			records = append(records, rec)
		}
	}
	return append([]httptrace.Event(nil), c.events...), records
}

// newChurnPool returns a pool that keeps one idle connection per host, its
// churn warnings observed by c and logged through slog.
func newChurnPool(t *testing.T, c *churnEvents) *pool.Pool {
	t.Helper()
	logged, err := httptrace.NewSlogObserver(slog.New(slog.NewJSONHandler(c, nil)), slog.LevelDebug, slog.LevelWarn)
	require.NoError(t, err)
	p, err := pool.New(pool.MaxIdleConnsPerHost(1), pool.WithObserver(c), pool.WithObserver(logged))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// twoAtOnce sends two requests whose bodies are open at once, then reads
// and closes both: the second needs a connection of its own, and one of
// the two finds the idle pool (one connection) full and is closed. It
// waits for that close, the closes'th for a full idle pool.
func twoAtOnce(t *testing.T, p *pool.Pool, url string, closes int64) {
	t.Helper()
	ctx := bounded(t)
	a := open(t, p, ctx, url)
	b := open(t, p, ctx, url)
	for _, body := range []io.ReadCloser{a.Body, b.Body} {
		_, err := io.Copy(io.Discard, body)
		require.NoError(t, err)
		require.NoError(t, body.Close())
	}
	waitStats(t, p, "a connection closed for a full idle pool", func(s pool.Stats) bool {
		return s.ClosedBy[vocab.ReasonIdlePoolFull] >= closes
	})
}

// TestChurnWarnsOnce: a pool that closes a connection for a full idle pool
// at every other request says so once, through its observers and slog,
// naming MaxIdleConnsPerHost, its value, the rate and the fix, however long
// the churn goes on.
func TestChurnWarnsOnce(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	c := &churnEvents{}
	p := newChurnPool(t, c)
	for i := range 30 {
		twoAtOnce(t, p, srv.URL, int64(i+1))
	}
	require.Equal(t, "ok", get(t, p, srv.URL)) // an event after the last close
	quiesce(t, p)
	s := p.Stats()
	require.EqualValues(t, 30, s.ClosedBy[vocab.ReasonIdlePoolFull], "%v", s.ClosedBy)
	require.EqualValues(t, 61, s.Requests)

	events, records := c.warnings(t)
	require.Len(t, events, 1, "one warning: %v", events)
	ev := events[0]
	require.Equal(t, strings.TrimPrefix(srv.URL, "http://"), ev.Addr)
	require.EqualValues(t, 10, ev.N, "the closes counted")
	require.ErrorContains(t, ev.Err, "10 connections to "+ev.Addr+" closed for a full idle pool within 19 requests")
	require.ErrorContains(t, ev.Err, "MaxIdleConnsPerHost (1) keeps fewer idle connections than the 2 requests in flight at once need")
	require.ErrorContains(t, ev.Err, "raise MaxIdleConnsPerHost to 2: pool.MaxIdleConnsPerHost(2)")

	require.Len(t, records, 1, "one WARN record: %v", records)
	rec := records[0]
	require.Equal(t, "connections closed for a full idle pool: raise MaxIdleConnsPerHost", rec["msg"])
	require.Equal(t, ev.Addr, rec["host"])
	require.EqualValues(t, 10, rec["closes"])
	require.EqualValues(t, 19, rec["requests"])
	require.Equal(t, "MaxIdleConnsPerHost", rec["setting"])
	require.EqualValues(t, 1, rec["limit"])
	require.EqualValues(t, 2, rec["in_flight"])
	require.Contains(t, rec, "per_second")
	require.Contains(t, rec["fix"], "pool.MaxIdleConnsPerHost(2)")
}

// TestNoChurnWarning: a pool at steady reuse never warns, nor one that
// closes a connection for a full idle pool now and then (one in 60
// requests, ten such closes spanning 540 requests: the threshold is ten
// within 500).
func TestNoChurnWarning(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	t.Run("steady reuse", func(t *testing.T) {
		c := &churnEvents{}
		p := newChurnPool(t, c)
		for range 600 {
			require.Equal(t, "ok", get(t, p, srv.URL))
		}
		quiesce(t, p)
		s := p.Stats()
		require.EqualValues(t, 1, s.Dials)
		require.Zero(t, s.Closed)
		events, records := c.warnings(t)
		require.Empty(t, events)
		require.Empty(t, records)
	})
	t.Run("an occasional close", func(t *testing.T) {
		c := &churnEvents{}
		p := newChurnPool(t, c)
		for i := range 20 {
			for range 58 {
				require.Equal(t, "ok", get(t, p, srv.URL))
			}
			twoAtOnce(t, p, srv.URL, int64(i+1))
		}
		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		s := p.Stats()
		require.EqualValues(t, 20, s.ClosedBy[vocab.ReasonIdlePoolFull], "%v", s.ClosedBy)
		require.EqualValues(t, 1201, s.Requests)
		events, records := c.warnings(t)
		require.Empty(t, events)
		require.Empty(t, records)
	})
}
