package faultserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
)

// Below HTTP: the handshake that stalls and the connect that hangs.

func rawClient(t *testing.T, edit func(*http.Transport)) *http.Client {
	tr := &http.Transport{MaxConnsPerHost: 1}
	edit(tr)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestTLSStall(t *testing.T) {
	st, err := faultserver.NewTLSStall()
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	c := rawClient(t, func(tr *http.Transport) { tr.TLSHandshakeTimeout = 100 * time.Millisecond })

	_, err = c.Get(st.URL() + "/")
	require.ErrorContains(t, err, "net/http: TLS handshake timeout")
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout: %v", err)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
	<-st.Accepted()
	require.Equal(t, int64(1), st.ConnsAccepted())
}

func TestConnectHang(t *testing.T) {
	h, err := faultserver.NewConnectHang()
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Close()) }()
	require.GreaterOrEqual(t, h.Held(), 0)
	t.Logf("accept queue filled by %d held connection(s)", h.Held())

	d := &net.Dialer{Timeout: 100 * time.Millisecond}
	_, err = d.Dial("tcp", h.Addr())
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a dial timeout: %v", err)

	c := rawClient(t, func(tr *http.Transport) { tr.DialContext = d.DialContext })
	_, err = c.Get(h.URL() + "/")
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a dial timeout through net/http: %v", err)
	require.ErrorContains(t, err, "i/o timeout")
}
