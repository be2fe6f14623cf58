package audit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/pool"
)

// TestFateOfAConnectionClosedAfterRecovery: a connection the recovery
// request was served on outlived the fault, so a close that came after it
// is not the fault's; one the recovery did not use is reported closed.
func TestFateOfAConnectionClosedAfterRecovery(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	p, err := pool.New(pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, p.Quiesce(ctx))
	p.Client().CloseIdleConnections()
	require.NoError(t, p.WaitFor(ctx, func(s pool.Stats) bool { return s.Closed == 1 }))
	conns := p.Conns()
	require.Len(t, conns, 1)
	o := &Observed{Conn: conns[0].ID}

	require.Equal(t, Fate{Reused: true}, fateOf(p, o, true))
	require.Equal(t, Fate{ClosedBy: pool.ClosedByClient, Reason: pool.ReasonCloseIdle}, fateOf(p, o, false))
}
