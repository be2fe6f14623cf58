package httptrace_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentRequests sends 50 requests at once through one Transport
// (run it with -race). Each gets its own timeline, with exactly one done
// event and an id of its own; its events concern the connection the server
// saw that very request on.
func TestConcurrentRequests(t *testing.T) {
	const n = 50
	var (
		mu   sync.Mutex
		seen = map[string]string{} // path → client address the server saw
	)
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.RemoteAddr
		mu.Unlock()
		io.WriteString(w, r.URL.Path)
	}))
	dc := &dialCounter{}
	base := newBase(t, &http.Transport{DialContext: dc.DialContext, MaxIdleConnsPerHost: 8})
	tr, c := traced(t, base, nil)
	ctx := guardCtx(t)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			path := fmt.Sprintf("/c/%d", i)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && string(b) != path {
				err = fmt.Errorf("%s: body %q", path, b)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	tls := waitTimelines(t, c, n)
	require.Len(t, tls, n)
	ids := map[uint64]bool{}
	paths := map[string]bool{}
	for _, tl := range tls {
		assert.False(t, ids[tl.ID], "duplicate timeline id %d", tl.ID)
		ids[tl.ID] = true
		u, err := url.Parse(tl.URL())
		require.NoError(t, err)
		assert.False(t, paths[u.Path], "two timelines for %s", u.Path)
		paths[u.Path] = true

		assert.Equal(t, 1, tl.Count(vocab.KindDone), "%s: %v", u.Path, kindsOf(tl))
		assert.Equal(t, 1, tl.Count(vocab.KindResponse))
		assert.Equal(t, 1, tl.Count(vocab.KindBodyEOF))
		assert.Equal(t, 1, tl.Count(vocab.KindBodyClose))
		assert.Equal(t, vocab.ClassOK, tl.Outcome.Class)
		assert.Equal(t, int64(len(u.Path)), tl.BodyBytes)

		// The connection in the timeline is the one the server saw.
		mu.Lock()
		remote := seen[u.Path]
		mu.Unlock()
		require.NotNil(t, tl.Conn.Local, u.Path)
		assert.Equal(t, remote, tl.Conn.Local.String(), "%s: timeline's connection is not the one the server saw", u.Path)
		// Every event of the request proper names that connection.
		for _, e := range tl.Events[index(tl, vocab.KindGotConn, -1):] {
			if e.Kind == vocab.KindConnectStart || e.Kind == vocab.KindConnectDone ||
				e.Kind == vocab.KindDNSStart || e.Kind == vocab.KindDNSDone {
				continue // a dial of this request that another request may end up using
			}
			assert.Equal(t, tl.Conn.ID, e.Conn, "%s: %s names connection %d, served by %d", u.Path, e.Kind, e.Conn, tl.Conn.ID)
		}
		assert.NotZero(t, tl.Conn.ID)
		assert.LessOrEqual(t, tl.Conn.ID, uint64(dc.dials.Load()))
	}
	for i := range n {
		assert.True(t, paths[fmt.Sprintf("/c/%d", i)], "no timeline for /c/%d", i)
	}
	// A dial started for one request may end after it finished, when another
	// connection served it; such events are late and stay with their own
	// request.
	for _, le := range c.Late() {
		assert.True(t, ids[le.Timeline], "late event for unknown timeline %d", le.Timeline)
		switch le.Event.Kind {
		case vocab.KindConnectDone, vocab.KindConnectStart:
		default:
			t.Errorf("unexpected late %s", le.Event.Kind)
		}
	}
}
