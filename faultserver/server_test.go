package faultserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
)

func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{
		"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "10.0.0.1:8080", "example.com:80", "127.0.0.1", "[fe80::1%lo]:0",
	} {
		s, err := faultserver.NewUnstarted(faultserver.Addr(addr))
		require.Error(t, err, addr)
		require.Nil(t, s)
		if !strings.Contains(err.Error(), "missing port") {
			require.ErrorContains(t, err, "only loopback addresses", addr)
		}
	}
	_, err := faultserver.New(nil)
	require.ErrorContains(t, err, "nil Option")
}

func TestLoopbackAddrs(t *testing.T) {
	addrs := []string{"localhost:0", "127.0.0.1:0", "127.0.0.2:0"}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, "[::1]:0")
	}
	for _, addr := range addrs {
		for _, tlsOpt := range []bool{false, true} {
			opts := []faultserver.Option{faultserver.Addr(addr)}
			if tlsOpt {
				opts = append(opts, faultserver.TLS())
			}
			s := start(t, opts...)
			s.Handle("/ok", faultserver.OK{})
			host, _, err := net.SplitHostPort(s.Addr())
			require.NoError(t, err)
			require.True(t, net.ParseIP(host).IsLoopback(), s.Addr())
			if tlsOpt {
				require.Equal(t, "https://"+s.Addr(), s.URL())
			} else {
				require.Equal(t, "http://"+s.Addr(), s.URL())
			}
			_, body, err := newClient(t, s).get(t, s.URL()+"/ok")
			require.NoError(t, err, addr)
			require.Equal(t, "ok", body)
		}
	}
}

func TestLifecycle(t *testing.T) {
	s, err := faultserver.NewUnstarted()
	require.NoError(t, err)
	s.Handle("/ok", faultserver.OK{Body: "before start"})
	require.NoError(t, s.Start())
	require.ErrorContains(t, s.Start(), "twice")
	c := newClient(t, s)
	_, body, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, "before start", body)

	s.Handle("/late", faultserver.OK{Body: "after start"})
	_, body, err = c.get(t, s.URL()+"/late")
	require.NoError(t, err)
	require.Equal(t, "after start", body)

	c.tr.CloseIdleConnections()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice")
	require.ErrorContains(t, s.Start(), "after Close")
	_, _, err = c.get(t, s.URL()+"/ok")
	require.Error(t, err, "closed")

	u, err := faultserver.NewUnstarted()
	require.NoError(t, err)
	require.NoError(t, u.Close(), "an unstarted server closes")
}

// Close cuts a running handler and says so.
func TestCloseReportsWhatItCut(t *testing.T) {
	s, err := faultserver.New()
	require.NoError(t, err)
	s.Handle("/hang", faultserver.Hang{})
	c := newClient(t, s)

	errc := make(chan error, 1)
	go func() {
		_, _, err := c.get(t, s.URL()+"/hang")
		errc <- err
	}()
	<-s.Entered("/hang")
	err = s.Close()
	var ce *faultserver.CloseError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, faultserver.CloseError{ActiveConns: 1, RunningHandlers: 1}, *ce)
	require.EqualError(t, err, "faultserver: Close cut 1 active connection, 1 handler still running")
	require.ErrorIs(t, <-errc, io.EOF)
	require.Equal(t, int64(0), s.Counters("/hang").CancelsObserved, "the server closing is not a cancellation")
}

func TestCloseClientConnections(t *testing.T) {
	s := start(t)
	s.Handle("/hang", faultserver.Hang{})
	s.Handle("/ok", faultserver.OK{})
	c := newClient(t, s)

	errc := make(chan error, 1)
	go func() {
		_, _, err := c.get(t, s.URL()+"/hang")
		errc <- err
	}()
	<-s.Entered("/hang")
	s.CloseClientConnections()
	require.ErrorIs(t, <-errc, io.EOF)
	require.Equal(t, int64(0), s.Counters("/hang").CancelsObserved, "the server cutting is not a cancellation")

	_, body, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err, "the pool recovers on a new connection")
	require.Equal(t, "ok", body)
	require.Equal(t, int64(2), s.Totals().ConnsAccepted)
	// Close (in Cleanup) reports nothing: the cut handler has returned.
}

func TestClientTLSConfig(t *testing.T) {
	plain := start(t)
	require.Nil(t, plain.ClientTLSConfig())

	s := start(t, faultserver.TLS())
	a, b := s.ClientTLSConfig(), s.ClientTLSConfig()
	require.NotSame(t, a, b, "a fresh copy each call")
	require.Equal(t, "127.0.0.1", a.ServerName)
	a.ServerName = "changed"
	require.Equal(t, "127.0.0.1", s.ClientTLSConfig().ServerName)

	// The server presents a leaf for its address, signed by the CA the
	// configuration trusts alone; the CA is not the server's certificate.
	conn, err := tls.Dial("tcp", s.Addr(), s.ClientTLSConfig())
	require.NoError(t, err)
	peers := conn.ConnectionState().PeerCertificates
	require.NoError(t, conn.Close())
	require.Len(t, peers, 2, "the leaf, then its CA")
	require.False(t, peers[0].IsCA, "the served certificate is not a CA")
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, peers[0].ExtKeyUsage)
	require.True(t, peers[1].IsCA)
	trusted := x509.NewCertPool()
	trusted.AddCert(peers[1])
	require.True(t, s.ClientTLSConfig().RootCAs.Equal(trusted), "the CA, and only it, is trusted")

	// Without it, the certificate is not trusted.
	s.Handle("/ok", faultserver.OK{})
	c := newClient(t, s, func(tr *http.Transport) { tr.TLSClientConfig = nil })
	_, _, err = c.get(t, s.URL()+"/ok")
	require.ErrorContains(t, err, "certificate")
}

// Requests are counted per endpoint, connections per endpoint and in total.
func TestCountersPerEndpoint(t *testing.T) {
	s := start(t)
	s.Handle("/a", faultserver.OK{})
	s.Handle("/b", faultserver.Status{Code: 500})
	c := newClient(t, s)
	for _, p := range []string{"/a", "/b", "/a", "/missing"} {
		_, _, err := c.get(t, s.URL()+p)
		require.NoError(t, err)
	}
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 2, HandlersEntered: 2}, s.Counters("/a"))
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1}, s.Counters("/b"))
	require.Equal(t, faultserver.Counters{}, s.Counters("/never"))
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 4, HandlersEntered: 3}, s.Totals())

	// A second connection, by hand.
	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	buf := make([]byte, 12)
	_, err = io.ReadFull(conn, buf)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200", string(buf))
	require.Equal(t, int64(2), s.Totals().ConnsAccepted)
	require.Equal(t, int64(2), s.Counters("/a").ConnsAccepted)
}
