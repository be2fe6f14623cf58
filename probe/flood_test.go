package probe_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// returnBound bounds the wait for a probe to return once its context has
// ended: generous, because it is only hit when the probe hangs.
const returnBound = 5 * time.Second

// pingFlood starts a TLS server speaking HTTP/2 that answers no request:
// once a request's headers arrive it writes PING frames until a write
// fails, and reads nothing more. The client acknowledges each PING; once
// the acknowledgements fill the connection, its read loop blocks writing
// one, holding the connection's write lock, so that the reset of a
// cancelled stream is never written and the connection never becomes
// idle. With response, the server first sends the response's headers (a
// 200 whose body never comes). flooding is closed when the flood begins.
//
// The listener advertises small segments and a small receive window, so
// that the client's socket buffers little and the flood blocks it after a
// few thousand PINGs, not the hundred thousand that loopback's 64 KiB
// segments would take.
func pingFlood(t *testing.T, response bool) (s *server, flooding <-chan struct{}) {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	cert := hs.TLS.Certificates
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	hs.Close()
	cfg := &tls.Config{Certificates: cert, NextProtos: []string{"h2"}}
	// PINGs are written 1024 at a time: a TLS record each write, not each
	// frame.
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	for i := range 1024 {
		fr.WritePing(false, [8]byte{byte(i), byte(i >> 8)})
	}
	started := make(chan struct{})
	s = &server{}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1024)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
			}
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	flood := func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil {
			return
		}
		testserver.ServeH2(tc, func(fr *http2.Framer, f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				return true
			}
			if response {
				var hbuf bytes.Buffer
				hpack.NewEncoder(&hbuf).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: hbuf.Bytes(), EndHeaders: true}) != nil {
					return false
				}
			}
			if s.requests.Add(1) == 1 {
				close(started)
			}
			// Until the test's end closes the connection.
			for {
				if _, err := tc.Write(batch.Bytes()); err != nil {
					return false
				}
			}
		})
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				flood(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	s.URL = "https://" + ln.Addr().String()
	s.tls = &tls.Config{RootCAs: roots, ServerName: "example.com"}
	return s, started
}

// floodLabel is the pprof label under which a test's probe runs, so that
// its goroutines, net/http's included, can be told from other tests'.
const floodLabel = "connaudit.test"

// awaitReadLoopBlocked waits until net/http's HTTP/2 read loop of the probe
// run under the label floodLabel=name is parked waiting to write (a PING's
// acknowledgement: it writes nothing else), and stays parked in every look
// over 500ms: the server reads nothing, so it stays parked for good. (A
// first park can end: the client's kernel may grow its send buffer when it
// first probes the server's closed window, a few hundred milliseconds
// later.) It looks at the goroutine profile every 10ms, for at most
// testkit.WaitBound.
func awaitReadLoopBlocked(t *testing.T, name string) {
	t.Helper()
	label := strconv.Quote(floodLabel) + ":" + strconv.Quote(name)
	parked := func() bool {
		var b strings.Builder
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
		for _, g := range strings.Split(b.String(), "\n\n") {
			if strings.Contains(g, label) && strings.Contains(g, "http2clientConnReadLoop).processPing") &&
				strings.Contains(g, "internal/poll.(*pollDesc).waitWrite") {
				return true
			}
		}
		return false
	}
	const (
		every = 10 * time.Millisecond
		looks = 50
	)
	ctx := testkit.Bounded(t)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for seen := 0; seen < looks; {
		if parked() {
			seen++
		} else {
			seen = 0
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the flood did not block the client's read loop within %v", testkit.WaitBound)
		}
	}
}

type probeResult struct {
	rep *probe.Result
	err error
}

// probeAsync runs a probe of s on its own goroutine, under the pprof label
// floodLabel=t.Name(); the result comes on the channel.
func probeAsync(ctx context.Context, t *testing.T, s *server, opts ...probe.Option) <-chan probeResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/", nil)
	require.NoError(t, err)
	opts = append([]probe.Option{probe.TLSClientConfig(s.tls)}, opts...)
	res := make(chan probeResult, 1)
	go pprof.Do(ctx, pprof.Labels(floodLabel, t.Name()), func(ctx context.Context) {
		rep, err := probe.Run(ctx, req, opts...)
		res <- probeResult{rep, err}
	})
	return res
}

// TestPingFloodEndsWithTheRun: against an HTTP/2 server that floods PING
// frames and reads nothing, a probe returns soon after its caller's
// context or its deadline ends, though its connection cannot close, and
// reports the request the end cut and the connection still open. Each
// phase's wait for its connections to close is made an hour long
// (SettleBound), so that a wait that ignored the end would hang.
func TestPingFloodEndsWithTheRun(t *testing.T) {
	t.Parallel()
	// Time for the flood to block the client before the deadline: well
	// under a second, unless the machine is very busy.
	const deadline = 3 * time.Second
	for _, tc := range []struct {
		name     string
		response bool // the server sends the response's headers, then floods
		deadline bool // the deadline ends the run, not the caller
		stage    httptrace.Stage
		class    httptrace.Class
	}{
		{"interrupted awaiting headers", false, false, vocab.StageAwaitHeaders, vocab.ClassCanceled},
		{"interrupted in the body", true, false, vocab.StageBody, vocab.ClassCanceled},
		{"deadline awaiting headers", false, true, vocab.StageAwaitHeaders, vocab.ClassDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, flooding := pingFlood(t, tc.response)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			dl := guard
			if tc.deadline {
				dl = deadline
			}
			res := probeAsync(ctx, t, s, probe.Protocols(h2Only()), probe.Requests(2), probe.Deadline(dl),
				probe.SettleBound(time.Hour))
			testserver.Await(t, flooding, "the request")
			awaitReadLoopBlocked(t, t.Name())
			bound := returnBound
			if tc.deadline {
				select {
				case r := <-res:
					t.Fatalf("the probe returned before the flood blocked its client: %+v, %v", r.rep, r.err)
				default:
				}
				bound += deadline // the deadline is at most that far
			} else {
				cancel()
			}
			var r probeResult
			timer := time.NewTimer(bound)
			defer timer.Stop()
			select {
			case r = <-res:
			case <-timer.C:
				t.Fatalf("the probe has not returned %v after its context ended", returnBound)
			}
			rep := r.rep
			require.NotNil(t, rep)
			require.Equal(t, tc.deadline, rep.DeadlineReached)
			require.Equal(t, !tc.deadline, rep.Interrupted)
			if tc.deadline {
				var unusable *probe.UnusableError
				require.ErrorAs(t, r.err, &unusable, "nothing answered before the deadline")
				_, ok := rep.Has("deadline-reached")
				require.True(t, ok, "%+v", rep.Findings)
			} else {
				require.NoError(t, r.err, "the caller ended it: not an unusable target")
			}
			require.Equal(t, 1, rep.Requests, "the second request was never sent")
			require.Equal(t, 1, rep.Cut)
			require.Equal(t, map[httptrace.Class]int{tc.class: 1}, rep.Outcomes)
			require.Len(t, rep.Failures, 1)
			require.Equal(t, tc.stage, rep.Failures[0].Stage)
			require.EqualValues(t, 1, rep.Dials)
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			require.Equal(t, "h2", c.Proto, "%+v", c)
			require.Equal(t, 1, c.Requests, "%+v", c)
			require.Equal(t, boolInt(tc.response), c.Responses, "%+v", c)
			require.Empty(t, c.ClosedBy, "the flood keeps the connection from closing: %+v", c)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
