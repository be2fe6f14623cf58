package faultserver_test

import (
	"io"
	"net/http"
	"syscall"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
)

// TLS: HTTP/1 over TLS unless the client attempts HTTP/2; faults run on
// the standard HTTP/2 server too.

func TestTLSNegotiation(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/ok", faultserver.OK{})

	resp, body, err := newClient(t, s).get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, 1, resp.ProtoMajor, "a custom TLS config without ForceAttemptHTTP2 stays on HTTP/1")

	resp, body, err = newClient(t, s, h2).get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, "h2", resp.TLS.NegotiatedProtocol)
}

func TestHTTP2Only(t *testing.T) {
	s := start(t, faultserver.HTTP2Only())
	s.Handle("/ok", faultserver.OK{})

	// An HTTP/1 client offers no ALPN (or only http/1.1, which crypto/tls
	// treats alike): the handshake succeeds with no protocol, and the
	// server, speaking only HTTP/2, hangs up: "EOF", or "server closed idle
	// connection" if the client saw the close before writing its request.
	_, _, err := newClient(t, s).get(t, s.URL()+"/ok")
	require.Error(t, err)
	require.Equal(t, int64(0), s.Counters("/ok").RequestsRead)

	resp, _, err := newClient(t, s, h2).get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, int64(1), s.Counters("/ok").RequestsRead)
}

func TestTLSHTTP1Faults(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/reset", faultserver.Reset{})
	s.Handle("/close", faultserver.CloseBeforeResponse{})
	s.Handle("/short", faultserver.CloseMidBody{Length: 10, Send: 5})
	s.Handle("/x", faultserver.CloseBeforeResponse{After: 1})
	c := newClient(t, s)

	_, _, err := c.get(t, s.URL()+"/reset")
	require.ErrorIs(t, err, syscall.ECONNRESET)
	_, _, err = c.get(t, s.URL()+"/close")
	require.ErrorIs(t, err, io.EOF)
	_, body, err := c.get(t, s.URL()+"/short")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, "xxxxx", body)
	for range 2 {
		_, _, err = c.get(t, s.URL()+"/x")
		require.NoError(t, err)
	}
	require.Equal(t, int64(3), s.Counters("/x").RequestsRead, "hidden retry over TLS too")
}

func TestH2StdHangCancel(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/hang", faultserver.Hang{})
	s.Handle("/ok", faultserver.OK{})
	c := newClient(t, s, h2)

	cancelHanging(t, s, c)

	resp, _, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, int64(1), s.Totals().ConnsAccepted, "the stream was reset, the connection kept")
}

func TestH2StdFaults(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/reset", faultserver.Reset{})
	s.Handle("/short", faultserver.CloseMidBody{Length: 100, Send: 10})
	s.Handle("/stall", faultserver.StallMidBody{Length: 100, Send: 10})
	s.Handle("/large", faultserver.LargeBody{Size: 1 << 20})
	s.Handle("/close", faultserver.CloseBeforeResponse{})
	c := newClient(t, s, h2)

	_, _, err := c.get(t, s.URL()+"/reset")
	require.ErrorContains(t, err, "INTERNAL_ERROR")

	resp, body, err := c.get(t, s.URL()+"/short")
	require.ErrorContains(t, err, "INTERNAL_ERROR")
	require.Equal(t, 2, resp.ProtoMajor)
	require.Len(t, body, 10)

	resp, err = c.Get(s.URL() + "/stall")
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close()) // resets the stream
	awaitCancel(t, s, "/stall")

	_, body, err = c.get(t, s.URL()+"/large")
	require.NoError(t, err)
	require.Len(t, body, 1<<20)
	require.Equal(t, int64(1), s.Totals().ConnsAccepted, "stream faults keep the connection")

	_, _, err = c.get(t, s.URL()+"/close")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the connection is half-closed")
	require.Equal(t, int64(1), s.Counters("/close").RequestsRead)
}

func TestH2StdConnectionClose(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/cc", faultserver.ConnectionClose{})
	c := newClient(t, s, h2)
	for range 2 {
		resp, body, err := c.get(t, s.URL()+"/cc")
		require.NoError(t, err)
		require.Equal(t, 2, resp.ProtoMajor)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, int64(2), s.Totals().ConnsAccepted, "GOAWAY after each response")
	require.Equal(t, int64(2), s.Counters("/cc").RequestsRead)
}

// The h2 client's pool is not capped by MaxConnsPerHost; a 503 over h2 is
// just a response.
func TestH2StdStatus(t *testing.T) {
	s := start(t, faultserver.TLS())
	s.Handle("/busy", faultserver.Status{Code: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"2"}}})
	resp, _, err := newClient(t, s, h2).get(t, s.URL()+"/busy")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
}
