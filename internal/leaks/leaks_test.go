package leaks

import (
	"errors"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestName(t *testing.T) {
	require.NoError(t, Name(nil))
	plain := errors.New("found unexpected goroutines:\n[Goroutine 7 in state chan receive, with main.worker on top of the stack:\ngoroutine 7 [chan receive]:\nmain.worker()\n\t/src/main.go:10 +0x1d\n]")
	require.Same(t, plain, Name(plain), "nothing to name")

	// The text goleak prints: a list of stacks, each headed by
	// "Goroutine N in state S, with F on top of the stack:".
	synthetic := errors.New(`found unexpected goroutines:
[Goroutine 21 in state IO wait, with internal/poll.runtime_pollWait on top of the stack:
internal/poll.runtime_pollWait(0x7f0c, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
net.(*conn).Read(0xc000112010, {0xc00019a000, 0x1000, 0x1000})
	/usr/local/go/src/net/net.go:196 +0x45
bufio.(*Reader).Peek(0xc0001980c0, 0x1)
	/usr/local/go/src/bufio/bufio.go:152 +0x5d
net/http.(*persistConn).readLoop(0xc0001a2000)
	/usr/local/go/src/net/http/transport.go:2346 +0x1a5
created by net/http.(*Transport).dialConn in goroutine 20
	/usr/local/go/src/net/http/transport.go:1960 +0x16a5
 Goroutine 22 in state select, with net/http.(*persistConn).writeLoop on top of the stack:
net/http.(*persistConn).writeLoop(0xc0001a2000)
	/usr/local/go/src/net/http/transport.go:2624 +0xe7
created by net/http.(*Transport).dialConn in goroutine 20
	/usr/local/go/src/net/http/transport.go:1961 +0x16f8
 Goroutine 9 in state IO wait, with internal/poll.runtime_pollWait on top of the stack:
internal/poll.runtime_pollWait(0x7f0d, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
net/http.(*conn).serve(0xc0000b2000, {0xc8, 0xc0000a4000})
	/usr/local/go/src/net/http/server.go:2102 +0x625
created by net/http.(*Server).Serve in goroutine 8
	/usr/local/go/src/net/http/server.go:3454 +0x485
]`)
	named := Name(synthetic)
	require.ErrorIs(t, named, synthetic)
	msg := named.Error()
	require.Contains(t, msg, "connection held by an unclosed response body")
	require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
	require.Contains(t, msg, "1 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).writeLoop)")
	require.Contains(t, msg, "1 × a server connection still open (net/http.(*conn).serve)")
	require.NotContains(t, msg, "server still running", "a 'created by' line is not the goroutine itself")

	// runtime.Stack's own format: blocks separated by blank lines.
	raw := errors.New("goroutine 21 [IO wait]:\nnet/http.(*persistConn).readLoop(0xc0001a2000)\n\t/usr/local/go/src/net/http/transport.go:2346 +0x1a5\n\n" +
		"goroutine 23 [IO wait]:\nnet/http.(*persistConn).readLoop(0xc0001a2100)\n\t/usr/local/go/src/net/http/transport.go:2346 +0x1a5\n")
	require.Contains(t, Name(raw).Error(), "2 × connection held by an unclosed response body or an idle connection (net/http.(*persistConn).readLoop)")
}
