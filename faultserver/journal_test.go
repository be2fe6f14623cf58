package faultserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
)

// journal collects a server's connection events.
type journal struct {
	mu     sync.Mutex
	events []faultserver.ConnEvent
	closed chan faultserver.ConnEvent
}

func newJournal() *journal { return &journal{closed: make(chan faultserver.ConnEvent, 16)} }

func (j *journal) add(ev faultserver.ConnEvent) {
	j.mu.Lock()
	j.events = append(j.events, ev)
	j.mu.Unlock()
	if ev.Kind == faultserver.ConnClosed {
		j.closed <- ev
	}
}

func (j *journal) kinds() (accepted, requests int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ev := range j.events {
		switch ev.Kind {
		case faultserver.ConnAccepted:
			accepted++
		case faultserver.ConnRequest:
			requests++
		}
	}
	return accepted, requests
}

func (j *journal) nextClose(t *testing.T) faultserver.ConnEvent {
	t.Helper()
	select {
	case ev := <-j.closed:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no connection closed within 5s")
	}
	return faultserver.ConnEvent{}
}

func get(t *testing.T, c *http.Client, url string) error {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// TestConnEvents: the server reports each connection accepted, each
// request read on it, and who closed it first and how.
func TestConnEvents(t *testing.T) {
	j := newJournal()
	s, err := faultserver.New(faultserver.OnConnEvent(j.add))
	require.NoError(t, err)
	defer s.Close()
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/reset", faultserver.Reset{})
	s.Handle("/close", faultserver.ConnectionClose{})
	s.Handle("/hang", faultserver.Hang{})
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}

	// Two requests on one kept-alive connection, closed by the client.
	require.NoError(t, get(t, c, s.URL()+"/ok"))
	require.NoError(t, get(t, c, s.URL()+"/ok"))
	tr.CloseIdleConnections()
	ev := j.nextClose(t)
	require.Equal(t, "client", ev.ClosedBy)
	require.Equal(t, "fin", ev.How)
	accepted, requests := j.kinds()
	require.Equal(t, 1, accepted)
	require.Equal(t, 2, requests)

	// A reset: closed by the server, with an RST.
	require.Error(t, get(t, c, s.URL()+"/reset"))
	ev = j.nextClose(t)
	require.Equal(t, "server", ev.ClosedBy)
	require.Equal(t, "rst", ev.How)

	// Connection: close: the server's FIN.
	require.NoError(t, get(t, c, s.URL()+"/close"))
	ev = j.nextClose(t)
	require.Equal(t, "server", ev.ClosedBy)
	require.Equal(t, "fin", ev.How)

	// A client that times out on a hanging handler closes first.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL()+"/hang", nil)
	_, err = c.Do(req)
	cancel()
	require.Error(t, err)
	ev = j.nextClose(t)
	require.Equal(t, "client", ev.ClosedBy)

	// CloseConn cuts a connection as the server: the hanging handler's
	// client gets an error and no cancellation is counted.
	done := make(chan error, 1)
	go func() { done <- get(t, c, s.URL()+"/hang") }()
	<-s.Entered("/hang")
	<-s.Entered("/hang") // the one above and this one
	var id uint64
	j.mu.Lock()
	for _, e := range j.events {
		if e.Kind == faultserver.ConnRequest && e.Path == "/hang" {
			id = e.Conn
		}
	}
	j.mu.Unlock()
	require.True(t, s.CloseConn(id))
	require.Error(t, <-done)
	ev = j.nextClose(t)
	require.Equal(t, "server", ev.ClosedBy)
	require.False(t, s.CloseConn(id), "a closed connection")
	require.Equal(t, int64(1), s.Counters("/hang").CancelsObserved, "the cut is not a cancellation")
	tr.CloseIdleConnections()
}

// TestCloseWriteConnAndResetConn: the server closes an idle kept-alive
// connection, with a FIN (it then sees the client's own close) or an RST;
// either way the close is the server's, and the client's next request
// comes on a new connection.
func TestCloseWriteConnAndResetConn(t *testing.T) {
	for _, how := range []string{"fin", "rst"} {
		t.Run(how, func(t *testing.T) {
			j := newJournal()
			s, err := faultserver.New(faultserver.OnConnEvent(j.add))
			require.NoError(t, err)
			defer s.Close()
			s.Handle("/ok", faultserver.OK{})
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			require.NoError(t, get(t, c, s.URL()+"/ok"))
			var id uint64
			j.mu.Lock()
			for _, e := range j.events {
				if e.Kind == faultserver.ConnRequest {
					id = e.Conn
				}
			}
			j.mu.Unlock()
			if how == "fin" {
				require.True(t, s.CloseWriteConn(id))
			} else {
				require.True(t, s.ResetConn(id))
			}
			ev := j.nextClose(t)
			require.Equal(t, id, ev.Conn)
			require.Equal(t, "server", ev.ClosedBy)
			require.Equal(t, how, ev.How)
			require.False(t, s.CloseWriteConn(id), "a closed connection")
			require.False(t, s.ResetConn(id), "a closed connection")
			require.NoError(t, get(t, c, s.URL()+"/ok"))
			accepted, requests := j.kinds()
			require.Equal(t, 2, accepted, "the next request on a new connection")
			require.Equal(t, 2, requests)
		})
	}
}

// TestConnEventsTLS: over TLS a client's close (close_notify, then FIN)
// is the client's, and the server's Connection: close is the server's.
func TestConnEventsTLS(t *testing.T) {
	j := newJournal()
	s, err := faultserver.New(faultserver.TLS(), faultserver.OnConnEvent(j.add))
	require.NoError(t, err)
	defer s.Close()
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/close", faultserver.ConnectionClose{})
	tr := &http.Transport{TLSClientConfig: s.ClientTLSConfig()}
	c := &http.Client{Transport: tr}
	require.NoError(t, get(t, c, s.URL()+"/ok"))
	tr.CloseIdleConnections()
	require.Equal(t, "client", j.nextClose(t).ClosedBy)
	require.NoError(t, get(t, c, s.URL()+"/close"))
	require.Equal(t, "server", j.nextClose(t).ClosedBy)
	tr.CloseIdleConnections()
}

// TestWithCertificateAndRemove: two servers share one certificate, which
// ClientTLSConfig trusts; Remove forgets a path.
func TestWithCertificateAndRemove(t *testing.T) {
	a, err := faultserver.New(faultserver.TLS())
	require.NoError(t, err)
	defer a.Close()
	cfg := a.ClientTLSConfig()
	// The first server's certificate, served by a second one.
	conn, err := tls.Dial("tcp", a.Addr(), cfg)
	require.NoError(t, err)
	state := conn.ConnectionState()
	conn.Close()
	var chain [][]byte
	for _, c := range state.PeerCertificates {
		chain = append(chain, c.Raw)
	}
	b, err := faultserver.New(faultserver.Certificate(tls.Certificate{Certificate: chain}))
	require.NoError(t, err, "a certificate without its key is refused only at the handshake")
	require.True(t, b.ClientTLSConfig().RootCAs.Equal(cfg.RootCAs), "the second server trusts the same CA")
	b.Close()
	alone, err := faultserver.New(faultserver.Certificate(tls.Certificate{Certificate: chain[:1]}))
	require.NoError(t, err)
	leaf := x509.NewCertPool()
	leaf.AddCert(state.PeerCertificates[0])
	require.True(t, alone.ClientTLSConfig().RootCAs.Equal(leaf), "a certificate alone is its own root")
	alone.Close()
	_, err = faultserver.New(faultserver.Certificate(tls.Certificate{}))
	require.ErrorContains(t, err, "no certificate")

	a.Handle("/x", faultserver.Status{Code: 503})
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	resp, err := c.Get(a.URL() + "/x")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, int64(1), a.Counters("/x").RequestsRead)
	a.Remove("/x")
	require.Equal(t, faultserver.Counters{}, a.Counters("/x"))
	resp, err = c.Get(a.URL() + "/x")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)
}
