package httptrace

import (
	"net"
	"net/http"
	"net/http/httptest"
	stdtrace "net/http/httptrace"
	"testing"

	"github.com/stretchr/testify/require"
)

// addrConn is a connection with an id and addresses of its own.
type addrConn struct {
	net.Conn
	id            uint64
	local, remote net.Addr
}

func (c *addrConn) ConnID() uint64       { return c.id }
func (c *addrConn) LocalAddr() net.Addr  { return c.local }
func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

// valueConn is a connection of a type that cannot be compared: comparing
// two interfaces holding it panics.
type valueConn struct {
	net.Conn
	ids []uint64
}

func (c valueConn) ConnID() uint64       { return c.ids[0] }
func (c valueConn) LocalAddr() net.Addr  { return &net.TCPAddr{Port: int(c.ids[0])} }
func (c valueConn) RemoteAddr() net.Addr { return &net.TCPAddr{Port: 80} }

// TestIdentifyAcrossRequests checks that a recycled recorder records the
// id and addresses of each request's own connection, whether it is the
// connection of the request before or not, and whatever its type.
func TestIdentifyAcrossRequests(t *testing.T) {
	tr, err := NewTransport(&http.Transport{})
	require.NoError(t, err)
	r := newRecorder(tr)
	tcp := func(port int) net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port} }
	a := &addrConn{id: 1, local: tcp(1001), remote: tcp(80)}
	b := &addrConn{id: 2, local: tcp(1002), remote: tcp(80)}
	v1 := valueConn{ids: []uint64{3}}
	v2 := valueConn{ids: []uint64{4}}

	for i, c := range []net.Conn{a, a, b, a, v1, v1, v2, a, nil, b} {
		r.begin(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		r.gotConnHook(stdtrace.GotConnInfo{Conn: c, Reused: true, WasIdle: true})
		r.mu.Lock()
		got := r.tl.Conn
		r.mu.Unlock()
		if c == nil {
			require.Zero(t, got.ID, "request %d", i)
			require.Nil(t, got.Local, "request %d", i)
		} else {
			require.Equal(t, connID(c), got.ID, "request %d", i)
			require.Equal(t, c.LocalAddr(), got.Local, "request %d", i)
			require.Equal(t, c.RemoteAddr(), got.Remote, "request %d", i)
		}
		r.reset()
	}
}
