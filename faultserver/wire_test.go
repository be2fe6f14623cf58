package faultserver_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Clients below net/http, for the faults that act between requests: a raw
// HTTP/1 socket and a frame-level HTTP/2 client, so that a test sees
// exactly what the server wrote and how it closed.

// events collects a server's connection events and signals the unread and
// closed ones.
type events struct {
	mu     sync.Mutex
	list   []faultserver.ConnEvent
	unread chan faultserver.ConnEvent
	closed chan faultserver.ConnEvent
}

func newEvents() *events {
	return &events{unread: make(chan faultserver.ConnEvent, 256), closed: make(chan faultserver.ConnEvent, 64)}
}

func (e *events) add(ev faultserver.ConnEvent) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
	var ch chan faultserver.ConnEvent
	switch ev.Kind {
	case faultserver.ConnUnread:
		ch = e.unread
	case faultserver.ConnClosed:
		ch = e.closed
	default:
		return
	}
	select {
	case ch <- ev:
	default: // the test reads only the first few
	}
}

// next returns the next event of ch, failing the test past the wait bound.
func next(t *testing.T, ch <-chan faultserver.ConnEvent, what string) faultserver.ConnEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(testkit.WaitBound):
		t.Fatalf("no %s event within %v", what, testkit.WaitBound)
	}
	return faultserver.ConnEvent{}
}

// kinds returns the kinds of the events of connection id, in order.
func (e *events) kinds(id uint64) []faultserver.ConnEventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ks []faultserver.ConnEventKind
	for _, ev := range e.list {
		if ev.Conn == id {
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

func startEvents(t *testing.T, opts ...faultserver.Option) (*faultserver.Server, *events) {
	t.Helper()
	ev := newEvents()
	return start(t, append(opts, faultserver.OnConnEvent(ev.add))...), ev
}

// rawConn is an HTTP/1 client on a bare TCP connection.
type rawConn struct {
	t  *testing.T
	c  *net.TCPConn
	br *bufio.Reader
}

func dialRaw(t *testing.T, s *faultserver.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testkit.WaitBound))
	return &rawConn{t: t, c: c.(*net.TCPConn), br: bufio.NewReader(c)}
}

// send writes a request for path: a GET, or a POST with body if body is
// not empty.
func (r *rawConn) send(path, body string) error {
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"
	if body != "" {
		req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	_, err := io.WriteString(r.c, req)
	return err
}

// response reads a whole response.
func (r *rawConn) response() (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	require.NoError(r.t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	resp.Body.Close()
	return resp, string(b)
}

// ok sends a GET for path and requires 200 "ok".
func (r *rawConn) ok(path string) *http.Response {
	r.t.Helper()
	require.NoError(r.t, r.send(path, ""))
	resp, body := r.response()
	require.Equal(r.t, http.StatusOK, resp.StatusCode)
	require.Equal(r.t, "ok", body)
	return resp
}

// end reads until the connection ends and returns what was read and the
// error that ended it: io.EOF for the server's FIN, ECONNRESET for its RST.
func (r *rawConn) end() (string, error) {
	b, err := io.ReadAll(r.br)
	if err == nil {
		err = io.EOF // ReadAll hides it
	}
	return string(b), err
}

// lastConn returns the id of the connection of the last request read.
func (e *events) lastConn() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.list) - 1; i >= 0; i-- {
		if e.list[i].Kind == faultserver.ConnRequest {
			return e.list[i].Conn
		}
	}
	return 0
}

// h2Conn is an HTTP/2 client written frame by frame.
type h2Conn struct {
	t    *testing.T
	conn *tls.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32
	host string
}

func dialH2(t *testing.T, s *faultserver.Server) *h2Conn {
	t.Helper()
	cfg := s.ClientTLSConfig()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", s.Addr(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.Equal(t, "h2", conn.ConnectionState().NegotiatedProtocol)
	conn.SetDeadline(time.Now().Add(testkit.WaitBound))
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	c := &h2Conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn), next: 1, host: s.Addr()}
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(t, c.fr.WriteSettings())
	return c
}

// get sends a GET for path on a new stream and returns its id.
func (c *h2Conn) get(path string) uint32 {
	c.t.Helper()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", c.host}, {":path", path}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := c.next
	c.next += 2
	require.NoError(c.t, c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true,
	}))
	return id
}

// response reads frames until stream id ends and returns its status and
// body, acknowledging the server's settings on the way.
func (c *h2Conn) response(id uint32) (string, string) {
	c.t.Helper()
	var status string
	var body bytes.Buffer
	for {
		f, err := c.fr.ReadFrame()
		require.NoError(c.t, err)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(c.t, c.fr.WriteSettingsAck())
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				status = f.PseudoValue("status")
				if f.StreamEnded() {
					return status, body.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				body.Write(f.Data())
				if f.StreamEnded() {
					return status, body.String()
				}
			}
		case *http2.RSTStreamFrame:
			c.t.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
		}
	}
}

// ok sends a GET for path and requires 200 "ok".
func (c *h2Conn) ok(path string) {
	c.t.Helper()
	status, body := c.response(c.get(path))
	require.Equal(c.t, "200", status)
	require.Equal(c.t, "ok", body)
}

// end reads frames until the connection ends and returns the frames read
// (settings acknowledgements aside) and the error that ended it.
func (c *h2Conn) end() ([]http2.Frame, error) {
	var frames []http2.Frame
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return frames, err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && sf.IsAck() {
			continue
		}
		frames = append(frames, f)
	}
}
