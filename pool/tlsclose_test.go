package pool_test

import (
	"bufio"
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

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// slowCloseConn is a client connection whose writes, once closing is set,
// return only after a read on it failed (or a second passed): the server's
// answer to the client's close_notify then reaches the client before its
// Transport closes the connection, as it sometimes does on a busy machine.
type slowCloseConn struct {
	net.Conn
	closing *atomic.Bool
	once    sync.Once
	readErr chan struct{}
}

func (c *slowCloseConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(func() { close(c.readErr) })
	}
	return n, err
}

func (c *slowCloseConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.closing.Load() {
		select {
		case <-c.readErr:
		case <-time.After(time.Second):
		}
	}
	return n, err
}

// TestCloseIdleOverTLSWhenServerAnswersAtOnce: the client closes an idle
// TLS connection (CloseIdleConnections); the server answers its
// close_notify with a reset that the client reads before its close ends.
// That is the client's close, not the server's.
func TestCloseIdleOverTLSWhenServerAnswersAtOnce(t *testing.T) {
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS() // for its certificate
	cert.Close()
	serverTLS := &tls.Config{Certificates: cert.TLS.Certificates}
	ln := testserver.Raw(t, func(raw net.Conn) {
		c := tls.Server(raw, serverTLS)
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Anything more (the client's close_notify): reset.
		br.ReadByte()
		raw.(*net.TCPConn).SetLinger(0)
		raw.Close()
	})
	var closing atomic.Bool
	dialer := &net.Dialer{}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cert.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &slowCloseConn{Conn: c, closing: &closing, readErr: make(chan struct{})}, nil
		},
	}
	p, err := pool.Track(tr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	require.Equal(t, "ok", get(t, p, "https://"+ln.Addr().String()+"/"))
	quiesce(t, p)

	closing.Store(true)
	p.CloseIdleConnections()
	waitStats(t, p, "connection closed", func(s pool.Stats) bool { return s.Closed == 1 })
	requireClosed(t, p, vocab.ClosedByClient, vocab.ReasonCloseIdle)
}

// TestH2SurplusDialsClosedByClient: several requests at once on a pool
// with no cap dial a connection each; HTTP/2 keeps one per host and the
// Transport closes the others unused. Those are the client's closes, not
// a server's GOAWAY.
func TestH2SurplusDialsClosedByClient(t *testing.T) {
	const n = 4
	srv := newServer(t, tlsHTTP2, okHandler)
	var (
		mu      sync.Mutex
		dialing int
		all     = make(chan struct{})
	)
	dialer := &net.Dialer{}
	tr := &http.Transport{
		TLSClientConfig:   srv.trust(),
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// Hold each dial until all n have started.
			mu.Lock()
			dialing++
			if dialing == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	p, err := pool.Track(tr)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { require.Equal(t, "ok", get(t, p, srv.URL)) })
	}
	wg.Wait()
	quiesce(t, p)
	waitStats(t, p, "surplus connections closed", func(s pool.Stats) bool { return s.Dials == n && s.Closed == n-1 })
	unused := 0
	for _, c := range p.Conns() {
		if c.State != vocab.StateClosed {
			continue
		}
		require.Zero(t, c.Requests, "conn #%d", c.ID)
		require.Equal(t, vocab.ClosedByClient, c.ClosedBy, "conn #%d: %s", c.ID, c.CloseReason)
		require.Equal(t, vocab.ReasonH2Unused, c.CloseReason, "conn #%d", c.ID)
		unused++
	}
	require.Equal(t, n-1, unused)
}
