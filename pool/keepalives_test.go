package pool_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// h2NoGoAway is an HTTP/2 server built from x/net's frames that answers
// every request "ok" and never sends GOAWAY; it reports, on the channel
// it returns, each connection's end as it read it: io.EOF when the client
// closed first. It returns the server's URL and a Transport that trusts
// it, speaking HTTP/2.
func h2NoGoAway(t *testing.T) (string, *http.Transport, <-chan error) {
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS() // for its certificate
	cert.Close()
	serverTLS := &tls.Config{Certificates: cert.TLS.Certificates, NextProtos: []string{"h2"}}
	ended := make(chan error, 4)
	ln := testserver.Raw(t, func(raw net.Conn) {
		c := tls.Server(raw, serverTLS)
		if c.Handshake() != nil {
			return
		}
		testserver.ServeH2(c, func(fr *http2.Framer, f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				return true
			}
			var hb []byte
			enc := hpack.NewEncoder(writerFunc(func(p []byte) (int, error) { hb = append(hb, p...); return len(p), nil }))
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			enc.WriteField(hpack.HeaderField{Name: "content-length", Value: "2"})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: hb, EndHeaders: true})
			fr.WriteData(h.StreamID, true, []byte("ok"))
			return true
		})
		// ServeH2 returns on the first read that fails: the client's
		// close, if it closed first.
		_, err := c.Read(make([]byte, 1))
		ended <- err
	})
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: cert.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
		ForceAttemptHTTP2: true,
	}
	return "https://" + ln.Addr().String() + "/", tr, ended
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestKeepAlivesOffH2ClosedByClient: with DisableKeepAlives, net/http's
// HTTP/2 client closes a connection itself once its stream ended
// (closeOnIdle), with no GOAWAY from the server: the client's close for
// keep-alives off, never "closed by server (goaway)".
func TestKeepAlivesOffH2ClosedByClient(t *testing.T) {
	url, tr, ended := h2NoGoAway(t)
	tr.DisableKeepAlives = true
	p, err := pool.Track(tr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	resp := open(t, p, bounded(t), url)
	require.Equal(t, 2, resp.ProtoMajor, "HTTP/2 spoken")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "ok", string(b))
	select {
	case err := <-ended:
		require.ErrorIs(t, err, io.EOF, "the server read the client's close")
	case <-bounded(t).Done():
		t.Fatal("the client never closed its single-use HTTP/2 connection")
	}
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonKeepAlivesOff)
}

// TestKeepAlivesOffFailedRequest: with DisableKeepAlives, an HTTP/1
// connection whose request failed is closed because the request failed,
// as it is with keep-alives on: unsetting DisableKeepAlives would change
// nothing, so the close is not put down to it.
func TestKeepAlivesOffFailedRequest(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := newServer(t, plainHTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done() // the client closed the connection
	}))
	p := newPool(t, pool.DisableKeepAlives(true))
	ctx, cancel := context.WithCancel(bounded(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
	require.NoError(t, err)
	errc := goDo(p, req)
	<-entered
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	quiesce(t, p)
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	c := requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonRequestError)
	require.Equal(t, "canceled", c.CloseDetail)
}

// TestNoIdleKeptClosedForKeepAlivesOff: a Transport with a negative
// MaxIdleConnsPerHost keeps no idle connection: net/http refuses each
// connection offered to its idle pool (errKeepAlivesDisabled) without
// calling the PutIdleConn hook, and closes it. That is the setting's
// close, as with DisableKeepAlives, not a client close of no known cause;
// over HTTP/2, which keeps its connection whatever the setting, nothing
// is closed.
func TestNoIdleKeptClosedForKeepAlivesOff(t *testing.T) {
	t.Run("HTTP/1", func(t *testing.T) {
		srv := newServer(t, plainHTTP, okHandler)
		p, err := pool.Track(&http.Transport{MaxIdleConnsPerHost: -1})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		for range 2 {
			require.Equal(t, "ok", get(t, p, srv.URL))
		}
		quiesce(t, p)
		waitStats(t, p, "connections closed", func(s pool.Stats) bool { return s.Closed == 2 })
		s := p.Stats()
		require.EqualValues(t, 2, s.Dials)
		require.EqualValues(t, 2, s.ClosedBy[vocab.ReasonKeepAlivesOff], "closed by: %v", s.ClosedBy)
		require.EqualValues(t, 2, s.ClosedByClient)
		for _, c := range p.Conns() {
			require.Contains(t, c.CloseDetail, "MaxIdleConnsPerHost -1")
		}
		require.NoError(t, s.Check())
	})
	t.Run("HTTP/2", func(t *testing.T) {
		url, tr, _ := h2NoGoAway(t)
		tr.MaxIdleConnsPerHost = -1
		p, err := pool.Track(tr)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		for range 2 {
			require.Equal(t, "ok", get(t, p, url))
		}
		quiesce(t, p)
		s := p.Stats()
		require.EqualValues(t, 1, s.Dials)
		require.EqualValues(t, 0, s.Closed)
		require.EqualValues(t, 1, s.Idle)
	})
}

// closeNotifyFirst is a client connection whose write of the TLS
// close_notify (the first write after crypto/tls sets the write deadline
// it closes with) returns only once a read on it failed, or a second
// passed: the server's answer to the close (its own close_notify, its
// FIN) reaches the client's read loop before the close does.
type closeNotifyFirst struct {
	net.Conn
	closing atomic.Bool
	once    sync.Once
	readErr chan struct{}
}

func (c *closeNotifyFirst) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(func() { close(c.readErr) })
	}
	return n, err
}

func (c *closeNotifyFirst) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.closing.Load() {
		select {
		case <-c.readErr:
		case <-time.After(time.Second):
		}
	}
	return n, err
}

func (c *closeNotifyFirst) SetWriteDeadline(d time.Time) error {
	c.closing.Store(true)
	return c.Conn.SetWriteDeadline(d)
}

// TestKeepAlivesOffH2ServerAnswersAtOnce: the server's answer to the
// close_notify of a single-use HTTP/2 connection, read before the close
// ends, is no close of the server's.
func TestKeepAlivesOffH2ServerAnswersAtOnce(t *testing.T) {
	url, tr, ended := h2NoGoAway(t)
	tr.DisableKeepAlives = true
	dialer := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &closeNotifyFirst{Conn: c, readErr: make(chan struct{})}, nil
	}
	p, err := pool.Track(tr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	require.Equal(t, "ok", get(t, p, url))
	select {
	case err := <-ended:
		require.ErrorIs(t, err, io.EOF, "the server read the client's close")
	case <-bounded(t).Done():
		t.Fatal("the client never closed its single-use HTTP/2 connection")
	}
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonKeepAlivesOff)
}
