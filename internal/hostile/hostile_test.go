package hostile_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/connaudit/connaudit/internal/hostile"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const request = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n"

func start(t *testing.T, r hostile.Reply) *hostile.Server {
	t.Helper()
	h, err := hostile.New(r)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	return h
}

func dial(t *testing.T, h *hostile.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Each reply of the corpus arrives whole, then EOF (or, for a stalling
// reply, the server's Close ends it).
func TestCorpusOnTheWire(t *testing.T) {
	corpus := hostile.Corpus()
	names := map[string]bool{}
	for _, r := range corpus {
		require.NotEmpty(t, r.Name)
		require.False(t, names[r.Name], "duplicate name %q", r.Name)
		names[r.Name] = true
		t.Run(r.Name, func(t *testing.T) {
			h, err := hostile.New(r)
			require.NoError(t, err)
			defer h.Close()
			c := dial(t, h)
			switch r.Wait {
			case hostile.AfterRequest:
				_, err = io.WriteString(c, request)
			case hostile.AfterFirstRead:
				_, err = c.Write([]byte{0x16, 0x03, 0x01}) // the start of a TLS record
			}
			require.NoError(t, err)
			got := make([]byte, len(r.Raw))
			_, err = io.ReadFull(c, got)
			require.NoError(t, err)
			require.True(t, bytes.Equal(r.Raw, got), "the reply arrives as is")
			if r.End == hostile.EndStall {
				require.NoError(t, h.Close()) // ends the stall
			}
			rest, err := io.ReadAll(c)
			require.NoError(t, err, "EOF, not a reset")
			require.Empty(t, rest)
			require.EqualValues(t, 1, h.ConnsAccepted())
			require.NoError(t, h.Close())
		})
	}
	require.True(t, names["garbage"] && names["tls-alert"] && names["1xx-flood"])
}

func TestCorpusIsFresh(t *testing.T) {
	a := hostile.Corpus()
	a[0].Raw[0] ^= 0xff
	a[0].Name = "changed"
	b := hostile.Corpus()
	require.NotEqual(t, a[0].Raw[0], b[0].Raw[0])
	require.NotEqual(t, "changed", b[0].Name)
	for _, r := range b {
		if r.Name == "huge-headers" {
			i := bytes.Index(r.Raw, []byte("\r\n\r\n"))
			require.Greater(t, i, 1<<20, "the header section exceeds 1 MiB")
		}
	}
}

func TestReplyOnAccept(t *testing.T) {
	h := start(t, hostile.Reply{Name: "hello", Raw: []byte("hello"), Wait: hostile.OnAccept})
	c := dial(t, h)
	b, err := io.ReadAll(c) // nothing written: the reply comes anyway
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
}

// A request head split across writes is read whole before the reply.
func TestReplyAfterSplitRequest(t *testing.T) {
	h := start(t, hostile.Reply{Name: "x", Raw: []byte("x")})
	c := dial(t, h)
	for _, part := range []string{"GET / HTTP/1.1\r\nHost: h\r", "\n\r", "\n"} {
		_, err := io.WriteString(c, part)
		require.NoError(t, err)
	}
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
}

func TestReset(t *testing.T) {
	h := start(t, hostile.Reply{Name: "rst", End: hostile.EndReset})
	c := dial(t, h)
	_, err := io.WriteString(c, request)
	require.NoError(t, err)
	_, err = io.ReadAll(c)
	require.True(t, errors.Is(err, syscall.ECONNRESET), "a reset: %v", err)
}

// A client that goes away ends its connection's goroutine at once; the
// server's Close ends the others.
func TestStallEndsWithEitherSide(t *testing.T) {
	h, err := hostile.New(hostile.Reply{Name: "stall", Raw: []byte("HTTP/1.1 200 OK\r\n"), End: hostile.EndStall})
	require.NoError(t, err)
	gone := dial(t, h)
	_, err = io.WriteString(gone, request)
	require.NoError(t, err)
	require.NoError(t, gone.Close())

	held := dial(t, h)
	_, err = io.WriteString(held, request)
	require.NoError(t, err)
	buf := make([]byte, len("HTTP/1.1 200 OK\r\n"))
	_, err = io.ReadFull(held, buf)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "Close twice")
	_, err = io.ReadAll(held)
	require.NoError(t, err, "the server's Close is an EOF")
	require.EqualValues(t, 2, h.ConnsAccepted())
	_, err = net.Dial("tcp", h.Addr())
	require.Error(t, err, "closed")
}

func TestSetReply(t *testing.T) {
	h := start(t, hostile.Reply{Name: "a", Raw: []byte("a")})
	require.Equal(t, "http://"+h.Addr(), h.URL())
	read := func() string {
		c := dial(t, h)
		_, err := io.WriteString(c, request)
		require.NoError(t, err)
		b, err := io.ReadAll(c)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "a", read())
	raw := []byte("b")
	require.NoError(t, h.SetReply(hostile.Reply{Name: "b", Raw: raw, HTTPS: true}))
	raw[0] = 'z' // the server keeps its own copy
	require.Equal(t, "b", read())
	require.Equal(t, "https://"+h.Addr(), h.URL())
	require.Equal(t, "b", h.Reply().Name)

	require.Error(t, h.SetReply(hostile.Reply{Wait: 7}))
	require.Error(t, h.SetReply(hostile.Reply{End: -1}))
	require.Equal(t, "b", h.Reply().Name, "a bad reply changes nothing")
	_, err := hostile.New(hostile.Reply{End: 9})
	require.Error(t, err)
	require.EqualValues(t, 2, h.ConnsAccepted())
}

func TestListensOnLoopback(t *testing.T) {
	h := start(t, hostile.Reply{})
	host, _, err := net.SplitHostPort(h.Addr())
	require.NoError(t, err)
	require.True(t, net.ParseIP(host).IsLoopback())
}
