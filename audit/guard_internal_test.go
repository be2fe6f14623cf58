package audit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
)

// TestStageNeverGoesBackFromBody: HTTP/2 may report a bodiless request
// written after its response came, when the write goroutine is descheduled
// between the flush and the hook. The guard must still see the request in
// the body stage, not waiting for its headers.
func TestStageNeverGoesBackFromBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	c := &httptrace.Collector{}
	tr, err := httptrace.NewTransport(http.DefaultTransport.(*http.Transport).Clone(), httptrace.WithObserver(c))
	require.NoError(t, err)
	t.Cleanup(func() { tr.CloseIdleConnections() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+faultPath, nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tls := c.Timelines()
	require.Len(t, tls, 1)
	tl := tls[0]

	p := newProgress()
	for _, k := range []httptrace.Kind{httptrace.KindGetConn, httptrace.KindGotConn, httptrace.KindResponse, httptrace.KindWroteRequest} {
		p.ObserveEvent(tl, httptrace.Event{Kind: k})
	}
	f, ok := p.inFlight()
	require.True(t, ok)
	require.Equal(t, httptrace.StageBody, f.stage, "a request written after its response came is in its body")

	// A request written before its response waits for its headers.
	p = newProgress()
	for _, k := range []httptrace.Kind{httptrace.KindGetConn, httptrace.KindGotConn, httptrace.KindWroteRequest} {
		p.ObserveEvent(tl, httptrace.Event{Kind: k})
	}
	f, ok = p.inFlight()
	require.True(t, ok)
	require.Equal(t, httptrace.StageAwaitHeaders, f.stage)
}
