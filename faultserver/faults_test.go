package faultserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

// Every fault over HTTP/1 on loopback, seen by a real http.Client.

func TestOK(t *testing.T) {
	s := start(t)
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/hello", faultserver.OK{Body: "hello"})
	c := newClient(t, s)

	resp, body, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", body)
	_, body, err = c.get(t, s.URL()+"/hello")
	require.NoError(t, err)
	require.Equal(t, "hello", body)

	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1}, s.Counters("/ok"))
	require.Equal(t, int64(1), c.dials.Load(), "keep-alive: one connection for both")
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2}, s.Totals())
}

func TestStatus(t *testing.T) {
	s := start(t)
	s.Handle("/busy", faultserver.Status{Code: 503, Header: http.Header{"Retry-After": {"1"}}})
	c := newClient(t, s)

	resp, body, err := c.get(t, s.URL()+"/busy")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Empty(t, body)
	_, _, err = c.get(t, s.URL()+"/busy")
	require.NoError(t, err)
	require.Equal(t, int64(1), c.dials.Load(), "a 503 keeps the connection")
	require.Equal(t, int64(2), s.Counters("/busy").RequestsRead)
}

func TestNotFoundIsCounted(t *testing.T) {
	s := start(t)
	c := newClient(t, s)

	resp, _, err := c.get(t, s.URL()+"/nothing?x=1")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1}, s.Counters("/nothing"))
	require.Empty(t, s.Entered("/nothing"), "no handler, no entry")
}

func TestHangCancel(t *testing.T) {
	s := start(t)
	s.Handle("/hang", faultserver.Hang{})
	c := newClient(t, s)

	cancelHanging(t, s, c)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, CancelsObserved: 1}, s.Counters("/hang"))
}

func TestHangResponseHeaderTimeout(t *testing.T) {
	s := start(t)
	s.Handle("/hang", faultserver.Hang{})
	c := newClient(t, s, func(tr *http.Transport) { tr.ResponseHeaderTimeout = 50 * time.Millisecond })

	_, _, err := c.get(t, s.URL()+"/hang")
	require.ErrorContains(t, err, "timeout awaiting response headers")
	awaitCancel(t, s, "/hang")
	require.Equal(t, int64(1), s.Counters("/hang").CancelsObserved)
}

// The Nth entry can be awaited: one value per entry.
func TestEnteredNth(t *testing.T) {
	const n = 3
	s := start(t)
	s.Handle("/hang", faultserver.Hang{})
	c := newClient(t, s, func(tr *http.Transport) { tr.MaxConnsPerHost = n })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, n)
	for range n {
		go func() {
			_, _, err := c.getCtx(t, ctx, s.URL()+"/hang")
			errc <- err
		}()
	}
	for range n {
		<-s.Entered("/hang")
	}
	require.Equal(t, int64(n), s.Counters("/hang").HandlersEntered)
	cancel()
	for range n {
		require.ErrorIs(t, <-errc, context.Canceled)
		awaitCancel(t, s, "/hang")
	}
	require.Equal(t, faultserver.Counters{ConnsAccepted: n, RequestsRead: n, HandlersEntered: n, CancelsObserved: n}, s.Counters("/hang"))
}

func TestCloseBeforeResponse(t *testing.T) {
	s := start(t)
	s.Handle("/close", faultserver.CloseBeforeResponse{})
	c := newClient(t, s)

	_, _, err := c.get(t, s.URL()+"/close")
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1}, s.Counters("/close"))
	require.Equal(t, int64(1), c.dials.Load(), "a fresh connection is not retried")
}

func TestReset(t *testing.T) {
	s := start(t)
	s.Handle("/reset", faultserver.Reset{})
	c := newClient(t, s)

	_, _, err := c.get(t, s.URL()+"/reset")
	require.ErrorIs(t, err, syscall.ECONNRESET)
	require.Equal(t, int64(1), s.Counters("/reset").RequestsRead)
}

func TestCloseMidBody(t *testing.T) {
	s := start(t)
	s.Handle("/short", faultserver.CloseMidBody{Length: 1000, Send: 100})
	c := newClient(t, s)

	resp, body, err := c.get(t, s.URL()+"/short")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, int64(1000), resp.ContentLength)
	require.Len(t, body, 100)
	require.Equal(t, int64(1), s.Counters("/short").RequestsRead)
}

func TestStallMidBody(t *testing.T) {
	s := start(t)
	s.Handle("/stall", faultserver.StallMidBody{Length: 100, Send: 10})
	c := newClient(t, s)

	resp, err := c.Get(s.URL() + "/stall")
	require.NoError(t, err)
	buf := make([]byte, 10)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("x", 10), string(buf))
	require.NoError(t, resp.Body.Close()) // before EOF: closes the connection
	awaitCancel(t, s, "/stall")
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, CancelsObserved: 1}, s.Counters("/stall"))
}

func TestTrickle(t *testing.T) {
	s := start(t)
	s.Handle("/trickle", faultserver.Trickle{Bytes: 5, Interval: time.Millisecond})
	s.Handle("/slow", faultserver.Trickle{Bytes: 1000, Interval: time.Hour})
	c := newClient(t, s)

	_, body, err := c.get(t, s.URL()+"/trickle")
	require.NoError(t, err)
	require.Equal(t, "xxxxx", body)

	// The first byte comes at once; the client leaves while waiting for
	// the second.
	resp, err := c.Get(s.URL() + "/slow")
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 1))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	awaitCancel(t, s, "/slow")
	require.Equal(t, int64(1), s.Counters("/slow").CancelsObserved)
}

func TestLargeBody(t *testing.T) {
	s := start(t)
	s.Handle("/large", faultserver.LargeBody{Size: 1 << 20})
	c := newClient(t, s)

	resp, body, err := c.get(t, s.URL()+"/large")
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), resp.ContentLength)
	require.Len(t, body, 1<<20)
}

func TestConnectionClose(t *testing.T) {
	s := start(t)
	s.Handle("/cc", faultserver.ConnectionClose{})
	c := newClient(t, s)

	for range 2 {
		resp, body, err := c.get(t, s.URL()+"/cc")
		require.NoError(t, err)
		require.True(t, resp.Close)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, int64(2), c.dials.Load(), "each request needs a new connection")
	require.Equal(t, faultserver.Counters{ConnsAccepted: 2, RequestsRead: 2, HandlersEntered: 2}, s.Counters("/cc"))
}

// CloseBeforeResponse{After: 1} on a kept-alive connection: the Transport
// silently retries the second GET on a new connection. The caller sees 2
// successes, the server reads 3 requests on 2 connections.
func TestCloseBeforeResponseHiddenRetry(t *testing.T) {
	s := start(t)
	s.Handle("/x", faultserver.CloseBeforeResponse{After: 1})
	c := newClient(t, s)

	for range 2 {
		resp, body, err := c.get(t, s.URL()+"/x")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, faultserver.Counters{ConnsAccepted: 2, RequestsRead: 3, HandlersEntered: 3}, s.Counters("/x"))
	require.Equal(t, int64(2), c.dials.Load())
	require.Equal(t, int64(2), s.Totals().ConnsAccepted)
}

// Reset{After: 1} on a kept-alive connection: the second GET is read and
// its connection reset, and the Transport retries it on a new one, as it
// does after a FIN (TestCloseBeforeResponseHiddenRetry).
func TestResetHiddenRetry(t *testing.T) {
	s := start(t)
	s.Handle("/x", faultserver.Reset{After: 1})
	c := newClient(t, s)

	for range 2 {
		resp, body, err := c.get(t, s.URL()+"/x")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, faultserver.Counters{ConnsAccepted: 2, RequestsRead: 3, HandlersEntered: 3}, s.Counters("/x"))
	require.Equal(t, int64(2), c.dials.Load())
}

func TestSequence(t *testing.T) {
	s := start(t)
	s.Handle("/seq", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.Status{Code: 503}, faultserver.Status{Code: 503}, faultserver.OK{},
	}})
	c := newClient(t, s)

	var got []int
	for range 4 {
		resp, _, err := c.get(t, s.URL()+"/seq")
		require.NoError(t, err)
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{503, 503, 200, 200}, got, "the last fault repeats")

	s.Handle("/seq", &faultserver.Sequence{Faults: []faultserver.Fault{&faultserver.Status{Code: 500}, faultserver.OK{}}})
	resp, _, err := c.get(t, s.URL()+"/seq")
	require.NoError(t, err)
	require.Equal(t, 500, resp.StatusCode, "Handle restarts the sequence")
	require.Equal(t, int64(5), s.Counters("/seq").RequestsRead)
}

// A Write with Report answers with the writes its endpoint has committed,
// counted as the counters count them: a duplicate key adds none.
func TestWriteReport(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
		edit []func(*http.Transport)
	}{
		{name: "http1"},
		{name: "h2", opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "raw h2", opts: []faultserver.Option{faultserver.TLS(), faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.opts...)
			s.Handle("/pay", faultserver.Sequence{Faults: []faultserver.Fault{
				faultserver.Write{Status: 503}, faultserver.Write{Report: true},
			}})
			c := newClient(t, s, tc.edit...)
			post := func(key string) (int, string) {
				req, err := http.NewRequest(http.MethodPost, s.URL()+"/pay", strings.NewReader("amount=1"))
				require.NoError(t, err)
				if key != "" {
					req.Header.Set("Idempotency-Key", key)
				}
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			code, body := post("")
			require.Equal(t, 503, code)
			require.Empty(t, body, "no report unless asked")
			code, body = post("")
			require.Equal(t, 200, code)
			require.Equal(t, "writes committed: 2", body)
			_, body = post("k")
			require.Equal(t, faultserver.Write{}.ReportBody(3), body)
			_, body = post("k")
			require.Equal(t, "writes committed: 3", body, "a duplicate commits nothing")
			require.Equal(t, int64(3), s.Counters("/pay").WritesCommitted)
		})
	}
}

func TestWriteDedup(t *testing.T) {
	s := start(t)
	s.Handle("/pay", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.Write{Status: 503}, faultserver.Write{},
	}})
	c := newClient(t, s)

	post := func(key string) int {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/pay", strings.NewReader("amount=1"))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 503, post("k1"), "committed, then 503")
	require.Equal(t, int64(1), s.Counters("/pay").WritesCommitted)
	require.Equal(t, 200, post("k1"), "the retry with the same key is a duplicate")
	require.Equal(t, int64(1), s.Counters("/pay").WritesCommitted)
	require.Equal(t, 200, post(""), "no key: always a new write")
	require.Equal(t, 200, post(""))
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 4, HandlersEntered: 4, WritesCommitted: 3}, s.Counters("/pay"))
	require.Equal(t, int64(3), s.Totals().WritesCommitted)
	require.Equal(t, []string{"k1", "k1"}, s.IdempotencyKeys("/pay"), "the keys received, duplicates included")
	require.Nil(t, s.IdempotencyKeys("/never"))
}

// A slow Status answers after its wait; a client that leaves first gets no
// answer and is counted as a cancellation.
func TestSlowStatus(t *testing.T) {
	s := start(t)
	s.Handle("/slow", faultserver.Status{Code: 503, After: 20 * time.Millisecond})
	c := newClient(t, s)
	resp, _, err := c.get(t, s.URL()+"/slow")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)

	s.Handle("/slower", faultserver.Status{Code: 200, After: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.Entered("/slower")
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/slower", nil)
	require.NoError(t, err)
	_, err = c.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	select {
	case <-s.CancelObserved("/slower"):
	case <-time.After(10 * time.Second):
		t.Fatal("the server never observed the client leave")
	}
	require.Equal(t, int64(1), s.Counters("/slower").CancelsObserved)
}

func TestHandleRejects(t *testing.T) {
	s := start(t)
	for name, f := range map[string]func(){
		"no slash":         func() { s.Handle("x", faultserver.OK{}) },
		"nil":              func() { s.Handle("/x", nil) },
		"nil pointer":      func() { s.Handle("/x", (*faultserver.OK)(nil)) },
		"bad status":       func() { s.Handle("/x", faultserver.Status{}) },
		"status after < 0": func() { s.Handle("/x", faultserver.Status{Code: 200, After: -1}) },
		"send >= length":   func() { s.Handle("/x", faultserver.CloseMidBody{Length: 10, Send: 10}) },
		"stall send":       func() { s.Handle("/x", faultserver.StallMidBody{Length: 1, Send: -1}) },
		"after < 0":        func() { s.Handle("/x", faultserver.CloseBeforeResponse{After: -1}) },
		"empty sequence":   func() { s.Handle("/x", faultserver.Sequence{}) },
		"nested sequence":  func() { s.Handle("/x", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.Sequence{}}}) },
		"goaway needs raw": func() {
			s.Handle("/x", faultserver.GoAway{})
		},
		"rst needs raw": func() {
			s.Handle("/x", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.RSTStream{}}})
		},
	} {
		require.Panics(t, f, name)
	}
	require.PanicsWithValue(t, `faultserver: Handle("/x"): GoAway needs RawHTTP2`, func() { s.Handle("/x", faultserver.GoAway{}) })
}

// awaitCancel waits until the server observed the client leave path,
// failing the test past testserver.AwaitBound.
// cancelHanging sends GET /hang, cancels it once the server's handler is
// entered, and waits until the request has failed with context.Canceled and
// the server has observed the client leave.
func cancelHanging(t *testing.T, s *faultserver.Server, c *client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.getCtx(t, ctx, s.URL()+"/hang")
		errc <- err
	}()
	<-s.Entered("/hang")
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	awaitCancel(t, s, "/hang")
}

func awaitCancel(t *testing.T, s *faultserver.Server, path string) {
	t.Helper()
	testserver.Await(t, s.CancelObserved(path), "the server's observing the client leave "+path)
}
