package faultserver_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// The faults that act between requests: CloseBeforeRead, GoDark,
// RequestLimit, IdleClose, and the Write of CloseBeforeResponse and Reset.

var (
	kAccepted = faultserver.ConnAccepted
	kRequest  = faultserver.ConnRequest
	kUnread   = faultserver.ConnUnread
	kClosed   = faultserver.ConnClosed
)

// CloseBeforeRead over HTTP/1: the next request's first bytes make the
// server close with a FIN, without reading it, and drain what follows, so
// that even a client still sending a large body reads a clean EOF.
func TestCloseBeforeReadFIN(t *testing.T) {
	// 16 MiB: more than the socket buffers hold, so that the client is
	// still sending when the server closes.
	for _, body := range []string{"", strings.Repeat("b", 16<<20)} {
		t.Run("body "+strconv.Itoa(len(body)), func(t *testing.T) {
			s, ev := startEvents(t)
			s.Handle("/x", faultserver.CloseBeforeRead{After: 1})
			s.Handle("/other", faultserver.OK{})
			c := dialRaw(t, s)
			c.ok("/x")
			id := ev.lastConn()

			sent := make(chan error, 1)
			go func() { sent <- c.send("/other", body) }()
			got, err := c.end()
			require.ErrorIs(t, err, io.EOF, "a FIN, not an RST")
			require.Empty(t, got, "nothing answered")
			require.NoError(t, <-sent, "the server read (and discarded) all the client sent")
			c.c.CloseWrite() // ends the server's drain

			un := next(t, ev.unread, "unread")
			require.Equal(t, "/x", un.Path, "the arming endpoint's path")
			closed := next(t, ev.closed, "closed")
			require.Equal(t, "server", closed.ClosedBy)
			require.Equal(t, "fin", closed.How)
			require.Equal(t, []faultserver.ConnEventKind{kAccepted, kRequest, kUnread, kClosed}, ev.kinds(id))
			require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, Unread: 1}, s.Counters("/x"))
			require.Equal(t, faultserver.Counters{}, s.Counters("/other"), "never read")
		})
	}
}

func TestCloseBeforeReadRST(t *testing.T) {
	s, ev := startEvents(t)
	s.Handle("/x", faultserver.CloseBeforeRead{After: 2, Reset: true})
	c := dialRaw(t, s)
	c.ok("/x")
	c.ok("/x")
	require.NoError(t, c.send("/x", ""))
	_, err := c.end()
	require.ErrorIs(t, err, syscall.ECONNRESET)
	require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
	closed := next(t, ev.closed, "closed")
	require.Equal(t, "server", closed.ClosedBy)
	require.Equal(t, "rst", closed.How)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2, Unread: 1}, s.Counters("/x"))
}

// CloseBeforeRead seen by net/http: the GET it drops is sent again on a new
// connection, which the caller never sees; a POST is not.
func TestCloseBeforeReadTransport(t *testing.T) {
	s := start(t)
	s.Handle("/x", faultserver.CloseBeforeRead{After: 1})
	c := newClient(t, s)
	for range 2 {
		_, body, err := c.get(t, s.URL()+"/x")
		require.NoError(t, err)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, faultserver.Counters{ConnsAccepted: 2, RequestsRead: 2, HandlersEntered: 2, Unread: 1}, s.Counters("/x"))
	require.Equal(t, int64(2), c.dials.Load())

	resp, err := c.Post(s.URL()+"/x", "text/plain", strings.NewReader("p"))
	require.Nil(t, resp)
	require.ErrorIs(t, err, io.EOF, "a POST is not sent again")
	require.Equal(t, int64(2), s.Counters("/x").Unread)
}

// Over RawHTTP2 the next HEADERS trips it; a PING, a WINDOW_UPDATE and a
// settings acknowledgement before it do not.
func TestRawH2CloseBeforeRead(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run("reset "+strconv.FormatBool(reset), func(t *testing.T) {
			s, ev := startEvents(t, faultserver.RawHTTP2())
			s.Handle("/x", faultserver.CloseBeforeRead{After: 1, Reset: reset})
			c := dialH2(t, s)
			c.ok("/x")
			id := ev.lastConn()
			require.NoError(t, c.fr.WriteSettingsAck())
			require.NoError(t, c.fr.WriteWindowUpdate(0, 1000))
			require.NoError(t, c.fr.WritePing(false, [8]byte{1}))
			f, err := c.fr.ReadFrame()
			require.NoError(t, err)
			require.IsType(t, &http2.PingFrame{}, f, "the connection is alive until a request comes")
			require.True(t, f.(*http2.PingFrame).IsAck())

			c.get("/x")
			frames, err := c.end()
			require.Empty(t, frames, "nothing answered")
			if reset {
				require.ErrorIs(t, err, syscall.ECONNRESET)
			} else {
				require.ErrorIs(t, err, io.EOF)
			}
			c.conn.Close()
			require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
			closed := next(t, ev.closed, "closed")
			require.Equal(t, "server", closed.ClosedBy)
			require.Equal(t, map[bool]string{false: "fin", true: "rst"}[reset], closed.How)
			require.Equal(t, []faultserver.ConnEventKind{kAccepted, kRequest, kUnread, kClosed}, ev.kinds(id))
			require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, Unread: 1}, s.Counters("/x"))
		})
	}
}

// GoDark over HTTP/1: after the response nothing the client sends is
// answered, and the connection stays open until the client closes it.
func TestGoDarkHTTP1(t *testing.T) {
	s, ev := startEvents(t)
	s.Handle("/x", faultserver.GoDark{After: 1})
	c := dialRaw(t, s)
	c.ok("/x")
	id := ev.lastConn()
	require.NoError(t, c.send("/x", ""))
	require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
	require.NoError(t, c.send("/x", "more"), "still open")
	next(t, ev.unread, "unread")
	require.NoError(t, c.c.CloseWrite())
	got, err := c.end()
	require.ErrorIs(t, err, io.EOF)
	require.Empty(t, got, "nothing written in the dark")
	closed := next(t, ev.closed, "closed")
	require.Equal(t, "client", closed.ClosedBy, "the server never closed it")
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, DarkConns: 1}, s.Counters("/x"))
	require.Equal(t, kClosed, ev.kinds(id)[len(ev.kinds(id))-1])
}

// GoDark over HTTP/2, on the standard server and on RawHTTP2: the response
// arrives whole; a PING after it is never answered, a request never read.
func TestGoDarkHTTP2(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
	}{
		{"standard", []faultserver.Option{faultserver.HTTP2Only()}},
		{"raw", []faultserver.Option{faultserver.RawHTTP2()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ev := startEvents(t, tc.opts...)
			s.Handle("/x", faultserver.GoDark{After: 2})
			c := dialH2(t, s)
			c.ok("/x")
			c.ok("/x")
			require.NoError(t, c.fr.WritePing(false, [8]byte{2}))
			next(t, ev.unread, "unread")
			c.get("/x")
			require.NoError(t, c.conn.CloseWrite()) // close_notify
			require.NoError(t, c.conn.NetConn().(interface{ CloseWrite() error }).CloseWrite())
			frames, err := c.end()
			require.ErrorIs(t, err, io.EOF)
			require.Empty(t, frames, "no PING acknowledgement, no response")
			require.Equal(t, "client", next(t, ev.closed, "closed").ClosedBy)
			require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2, DarkConns: 1}, s.Counters("/x"))
		})
	}
}

// GoDark seen by net/http, over each protocol: the request after the dark
// ends with the caller's own deadline.
func TestGoDarkTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
		edit []func(*http.Transport)
	}{
		{name: "http1"},
		{name: "https", opts: []faultserver.Option{faultserver.TLS()}},
		{name: "h2", opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "raw h2", opts: []faultserver.Option{faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ev := startEvents(t, tc.opts...)
			s.Handle("/x", faultserver.GoDark{After: 1})
			c := newClient(t, s, tc.edit...)
			_, body, err := c.get(t, s.URL()+"/x")
			require.NoError(t, err)
			require.Equal(t, "ok", body)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, _, err = c.getCtx(t, ctx, s.URL()+"/x")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			next(t, ev.unread, "unread")
			c.tr.CloseIdleConnections()
			require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, DarkConns: 1}, s.Counters("/x"))
		})
	}
}

// A dark connection ends when the server cuts it, or closes.
func TestGoDarkCut(t *testing.T) {
	s, ev := startEvents(t)
	s.Handle("/x", faultserver.GoDark{After: 1})
	c := dialRaw(t, s)
	c.ok("/x")
	require.NoError(t, c.send("/x", ""))
	next(t, ev.unread, "unread")
	require.True(t, s.CloseConn(ev.lastConn()))
	_, err := c.end()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "server", next(t, ev.closed, "closed").ClosedBy)

	for name, opts := range map[string][]faultserver.Option{
		"close http1": nil, "close h2": {faultserver.TLS()}, "close raw h2": {faultserver.RawHTTP2()},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := faultserver.New(opts...)
			require.NoError(t, err)
			s.Handle("/x", faultserver.GoDark{After: 1})
			var end func() error
			if len(opts) == 0 {
				c := dialRaw(t, s)
				c.ok("/x")
				end = func() error { _, err := c.end(); return err }
			} else {
				c := dialH2(t, s)
				c.ok("/x")
				end = func() error { _, err := c.end(); return err }
			}
			require.NoError(t, s.Close(), "a dark connection is no running handler")
			require.Error(t, end(), "Close ended the dark connection")
		})
	}
}

// RequestLimit without Announce over HTTP/1: the N-th response is whole and
// says nothing; then a FIN. A request the client sends on after it is not
// read but counted as unread.
func TestRequestLimitHTTP1(t *testing.T) {
	s, ev := startEvents(t)
	s.Handle("/x", faultserver.RequestLimit{N: 2})
	c := dialRaw(t, s)
	c.ok("/x")
	resp := c.ok("/x")
	require.False(t, resp.Close, "no Connection: close")
	require.Equal(t, int64(2), resp.ContentLength)
	id := ev.lastConn()
	_, err := c.c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server's FIN")
	require.NoError(t, c.send("/x", ""), "sent into the half-closed connection")
	require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
	c.c.Close()
	closed := next(t, ev.closed, "closed")
	require.Equal(t, "server", closed.ClosedBy)
	require.Equal(t, "fin", closed.How)
	require.Equal(t, []faultserver.ConnEventKind{kAccepted, kRequest, kRequest, kUnread, kClosed}, ev.kinds(id))
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2, Unread: 1}, s.Counters("/x"))
}

// RequestLimit with Announce: Connection: close over HTTP/1, GOAWAY over
// HTTP/2; each connection serves N requests.
func TestRequestLimitAnnounce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
		edit []func(*http.Transport)
	}{
		{name: "http1"},
		{name: "h2", opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "raw h2", opts: []faultserver.Option{faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.opts...)
			s.Handle("/x", faultserver.RequestLimit{N: 2, Announce: true})
			c := newClient(t, s, tc.edit...)
			for range 5 {
				_, body, err := c.get(t, s.URL()+"/x")
				require.NoError(t, err)
				require.Equal(t, "ok", body)
			}
			require.Equal(t, int64(3), c.dials.Load())
			require.Equal(t, faultserver.Counters{ConnsAccepted: 3, RequestsRead: 5, HandlersEntered: 5}, s.Counters("/x"))
		})
	}
}

// RequestLimit without Announce over RawHTTP2: the response's frames, then
// the connection closed with no GOAWAY.
func TestRawH2RequestLimit(t *testing.T) {
	s, ev := startEvents(t, faultserver.RawHTTP2())
	s.Handle("/x", faultserver.RequestLimit{N: 2})
	c := dialH2(t, s)
	c.ok("/x")
	c.ok("/x")
	frames, err := c.end()
	require.ErrorIs(t, err, io.EOF)
	require.Empty(t, frames, "no GOAWAY")
	c.conn.Close()
	require.Equal(t, "server", next(t, ev.closed, "closed").ClosedBy)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2}, s.Counters("/x"))

	// A request that raced the close is counted, unread.
	c = dialH2(t, s)
	c.ok("/x")
	c.get("/x")
	c.get("/x")
	c.end()
	require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
	require.Equal(t, int64(4), s.Counters("/x").RequestsRead)
	require.Equal(t, int64(1), s.Counters("/x").Unread)
}

// IdleClose over HTTP/1: the idle connection gets a FIN; a request sent
// after it is not read.
func TestIdleCloseHTTP1(t *testing.T) {
	s, ev := startEvents(t)
	s.Handle("/x", faultserver.IdleClose{Idle: 20 * time.Millisecond})
	c := dialRaw(t, s)
	c.ok("/x")
	id := ev.lastConn()
	_, err := c.c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server's FIN once idle")
	require.NoError(t, c.send("/x", ""))
	require.Equal(t, "/x", next(t, ev.unread, "unread").Path)
	c.c.Close()
	closed := next(t, ev.closed, "closed")
	require.Equal(t, "server", closed.ClosedBy)
	require.Equal(t, "fin", closed.How)
	require.Equal(t, []faultserver.ConnEventKind{kAccepted, kRequest, kUnread, kClosed}, ev.kinds(id))
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, Unread: 1}, s.Counters("/x"))
}

// A connection that is never idle long enough is never closed; net/http's
// client sees the idle close and dials anew.
func TestIdleCloseTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []faultserver.Option
		edit []func(*http.Transport)
	}{
		{name: "http1"},
		{name: "h2", opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "raw h2", opts: []faultserver.Option{faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ev := startEvents(t, tc.opts...)
			s.Handle("/long", faultserver.IdleClose{Idle: time.Hour})
			s.Handle("/x", faultserver.IdleClose{Idle: 20 * time.Millisecond})
			c := newClient(t, s, tc.edit...)
			for range 3 {
				_, _, err := c.get(t, s.URL()+"/long")
				require.NoError(t, err)
			}
			require.Equal(t, int64(1), c.dials.Load(), "never idle for an hour")
			_, _, err := c.get(t, s.URL()+"/x")
			require.NoError(t, err)
			closed := next(t, ev.closed, "closed") // the client closed after the server's FIN
			require.Equal(t, "server", closed.ClosedBy)
			_, body, err := c.get(t, s.URL()+"/x")
			require.NoError(t, err)
			require.Equal(t, "ok", body)
			require.Equal(t, int64(2), c.dials.Load())
			require.Equal(t, int64(0), s.Totals().Unread)
		})
	}
}

// IdleClose over RawHTTP2: GOAWAY(NO_ERROR) naming the last stream, then
// the close.
func TestRawH2IdleClose(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/long", faultserver.IdleClose{Idle: time.Hour})
	s.Handle("/x", faultserver.IdleClose{Idle: 20 * time.Millisecond})
	c := dialH2(t, s)
	c.ok("/long") // the connection's idle time is its last response's
	c.ok("/x")
	frames, err := c.end()
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, frames, 1)
	ga, ok := frames[0].(*http2.GoAwayFrame)
	require.True(t, ok, "%v", frames[0])
	require.Equal(t, http2.ErrCodeNo, ga.ErrCode)
	require.Equal(t, uint32(3), ga.LastStreamID)
}

// With Write, a POST commits before it is answered or cut; sent again with
// a key already seen, it commits nothing more.
func TestCloseBeforeResponseWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultserver.Fault
		opts  []faultserver.Option
		edit  []func(*http.Transport)
	}{
		{name: "close http1", fault: faultserver.CloseBeforeResponse{After: 1, Write: true}},
		{name: "reset http1", fault: faultserver.Reset{After: 1, Write: true}},
		{name: "close h2", fault: faultserver.CloseBeforeResponse{After: 1, Write: true},
			opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "reset h2", fault: faultserver.Reset{After: 1, Write: true},
			opts: []faultserver.Option{faultserver.TLS()}, edit: []func(*http.Transport){h2}},
		{name: "close raw h2", fault: faultserver.CloseBeforeResponse{After: 1, Write: true},
			opts: []faultserver.Option{faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
		{name: "reset raw h2", fault: faultserver.Reset{After: 1, Write: true},
			opts: []faultserver.Option{faultserver.RawHTTP2()}, edit: []func(*http.Transport){h2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.opts...)
			s.Handle("/pay", tc.fault)
			c := newClient(t, s, tc.edit...)
			post := func(key string) error {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL()+"/pay", strings.NewReader("amount=1"))
				require.NoError(t, err)
				if key != "" {
					req.Header.Set("Idempotency-Key", key)
				}
				resp, err := c.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				return err
			}
			require.NoError(t, post(""))
			require.Error(t, post(""), "cut, and not sent again")
			require.Equal(t, int64(2), s.Counters("/pay").WritesCommitted, "the cut one committed")
			c.get(t, s.URL()+"/pay") // answered or cut
			require.Equal(t, int64(2), s.Counters("/pay").WritesCommitted, "a GET commits nothing")
			if strings.HasSuffix(tc.name, "http1") {
				// Answered on a new connection, cut on its second request,
				// sent again by net/http for its key on a third: committed
				// once.
				require.NoError(t, post("k"))
				require.Equal(t, int64(3), s.Counters("/pay").WritesCommitted)
				require.Equal(t, []string{"k", "k"}, s.IdempotencyKeys("/pay"))
				require.Equal(t, int64(3), c.dials.Load())
			}
		})
	}
}

func TestHandleRejectsNewFaults(t *testing.T) {
	plain, tlsS, h2only, raw := start(t), start(t, faultserver.TLS()), start(t, faultserver.HTTP2Only()), start(t, faultserver.RawHTTP2())
	for _, tc := range []struct {
		s     *faultserver.Server
		fault faultserver.Fault
		msg   string
	}{
		{plain, faultserver.CloseBeforeRead{}, "CloseBeforeRead.After 0 is below 1: the connection is armed by a request it answered"},
		{tlsS, faultserver.CloseBeforeRead{After: 1}, "CloseBeforeRead needs plain HTTP/1 or RawHTTP2"},
		{h2only, faultserver.CloseBeforeRead{After: 1}, "CloseBeforeRead needs plain HTTP/1 or RawHTTP2"},
		{plain, faultserver.GoDark{}, "GoDark.After 0 is below 1"},
		{plain, faultserver.RequestLimit{}, "RequestLimit.N 0 is below 1"},
		{h2only, faultserver.RequestLimit{N: 1}, "RequestLimit without Announce over HTTP/2 needs RawHTTP2"},
		{plain, faultserver.IdleClose{}, "IdleClose.Idle 0s is not positive"},
		{plain, faultserver.IdleClose{Idle: -time.Second}, "IdleClose.Idle -1s is not positive"},
	} {
		require.PanicsWithValue(t, `faultserver: Handle("/x"): `+panicText(t, tc.s, tc.fault), func() { tc.s.Handle("/x", tc.fault) })
		require.Contains(t, panicText(t, tc.s, tc.fault), tc.msg)
	}
	for _, f := range []faultserver.Fault{faultserver.CloseBeforeRead{After: 1}, faultserver.RequestLimit{N: 1}, faultserver.GoDark{After: 1}} {
		require.NotPanics(t, func() { raw.Handle("/x", f) })
	}
	require.NotPanics(t, func() { h2only.Handle("/x", faultserver.RequestLimit{N: 1, Announce: true}) })
	require.NotPanics(t, func() { tlsS.Handle("/x", faultserver.RequestLimit{N: 1}) })
}

// panicText returns what Handle panics with, without "faultserver:
// Handle(...): ".
func panicText(t *testing.T, s *faultserver.Server, f faultserver.Fault) (msg string) {
	t.Helper()
	defer func() {
		v, _ := recover().(string)
		msg = strings.TrimPrefix(v, `faultserver: Handle("/x"): `)
	}()
	s.Handle("/x", f)
	return ""
}

// Over TLS, an HTTP/2 request for a fault only HTTP/1 can produce there is
// answered 501, saying why.
func TestRequestLimitH2Unsupported(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/x", faultserver.RequestLimit{N: 1})
	c := newClient(t, s, h2)
	resp, body, err := c.get(t, s.URL()+"/x")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	require.Contains(t, body, "RequestLimit without Announce over HTTP/2 needs RawHTTP2")

	// Over HTTP/1.1 on the same server it works.
	c1 := newClient(t, s, func(tr *http.Transport) { tr.TLSClientConfig.NextProtos = []string{"http/1.1"} })
	for range 2 {
		resp, body, err = c1.get(t, s.URL()+"/x")
		require.NoError(t, err)
		require.Equal(t, "ok", body)
		require.Equal(t, 1, resp.ProtoMajor)
	}
	require.Equal(t, int64(2), c1.dials.Load())
}
