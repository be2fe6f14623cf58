package faultserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds of a dark connection and of the drain after the server's
// FIN: past them the server closes, though the client never did.
func TestBounds(t *testing.T) {
	defer func(dark, drain time.Duration) { darkBound, drainBound = dark, drain }(darkBound, drainBound)
	darkBound, drainBound = 50*time.Millisecond, 50*time.Millisecond
	for _, f := range []Fault{GoDark{After: 1}, CloseBeforeRead{After: 1}} {
		closed := make(chan ConnEvent, 4)
		s, err := New(OnConnEvent(func(ev ConnEvent) {
			if ev.Kind == ConnClosed {
				closed <- ev
			}
		}))
		require.NoError(t, err)
		s.Handle("/x", f)
		c, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		_, err = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		_, err = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		_, err = br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "%T: the server closed at its bound", f)
		ev := <-closed
		require.Equal(t, "server", ev.ClosedBy, "%T", f)
		require.NoError(t, s.Close())
		c.Close()
	}
}
