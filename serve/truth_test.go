package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/notify"
)

// The truth: what each example client really does, measured against a
// raw-socket server of the test's own (no faultserver, no serve), so that
// the verdicts serve gives on these clients can be checked against it.

// truthConn is what the raw server saw of one connection.
type truthConn struct {
	n        int      // its place in accept order, from 1
	requests []string // "GET /path", in order
	closedBy string   // "client-fin", "client-rst", "server"
}

// truthServer serves a fault per request on raw sockets and records.
type truthServer struct {
	fault func(global, onConn int) string // "ok", "503", "stall", "close", "reset", "truncate"
	// plan, when set, is used instead of fault: what the server does with
	// the onConn-th request of its n-th connection. Besides fault's:
	// before reading it, "fin-unread" and "rst-unread" (as its first bytes
	// arrive the server closes the connection, FIN or RST, reading none of
	// it) and "dark" (the server reads and discards all that comes, answers
	// nothing and closes only once the client does); after reading it,
	// "ok-close" (200 with Connection: close, then the server's FIN),
	// "ok-fin" (200, then the server's FIN with no warning) and "ok-idle"
	// (200; the server's FIN once the connection has been idle for
	// truthIdle).
	plan    func(n, onConn int) string
	mu      sync.Mutex
	conns   []*truthConn
	n       int
	posts   int // POSTs read: each a write the server committed
	unread  int // requests the server closed a connection on, unread, or left unread on a dark one
	active  int // connections being served
	changes notify.Changes
	// finned is closed when the server closed a connection of its own
	// accord (ok-fin, ok-idle); gone when the client then closed its
	// side. The gate waits on them.
	finned, gone      chan struct{}
	finOnce, goneOnce sync.Once
}

// truthIdle is the raw server's keep-alive timeout (plan "ok-idle"), the
// catalogue's.
const truthIdle = 250 * time.Millisecond

// truthDrain bounds how long the server reads and discards after its FIN,
// waiting for the client to close its side.
const truthDrain = 2 * time.Second

func (s *truthServer) serve(c net.Conn, tc *truthConn) {
	defer func() {
		s.mu.Lock()
		s.active--
		s.changes.Signal()
		s.mu.Unlock()
	}()
	setBy := func(by string) {
		s.mu.Lock()
		if tc.closedBy == "" {
			tc.closedBy = by
		}
		s.mu.Unlock()
	}
	peer := func(err error) {
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			setBy("client-fin")
		case errors.Is(err, syscall.ECONNRESET):
			setBy("client-rst")
		default:
			setBy("server")
		}
	}
	br := bufio.NewReader(c)
	// finish sends the server's FIN and reads and discards what the
	// client still sends (a request there is unread, unless counted
	// already) until the client closes its side, or truthDrain passes.
	finish := func(signal, counted bool) {
		setBy("server")
		c.(*net.TCPConn).CloseWrite()
		if signal {
			s.finOnce.Do(func() { close(s.finned) })
		}
		c.SetReadDeadline(time.Now().Add(truthDrain))
		for {
			if _, err := br.Peek(1); err != nil {
				if signal && !isTimeout(err) {
					s.goneOnce.Do(func() { close(s.gone) })
				}
				return
			}
			if !counted {
				counted = true
				s.mu.Lock()
				s.unread++
				s.mu.Unlock()
			}
			br.Discard(br.Buffered())
		}
	}
	for onConn := 1; ; onConn++ {
		act := ""
		if s.plan != nil {
			act = s.plan(tc.n, onConn)
		}
		switch act {
		case "fin-unread", "rst-unread", "dark":
			if _, err := br.Peek(1); err != nil {
				peer(err)
				return
			}
			s.mu.Lock()
			s.unread++
			s.mu.Unlock()
			switch act {
			case "fin-unread":
				finish(false, true)
			case "rst-unread":
				setBy("server")
				c.(*net.TCPConn).SetLinger(0)
			case "dark":
				// Each later read that returns bytes is a request
				// sent on the dark connection (they come a bound
				// apart, so one read each).
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				for {
					br.Discard(br.Buffered())
					if _, err := br.Peek(1); err != nil {
						peer(err)
						return
					}
					s.mu.Lock()
					s.unread++
					s.mu.Unlock()
				}
			}
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			peer(err)
			return
		}
		io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		s.n++
		global := s.n
		tc.requests = append(tc.requests, req.Method+" "+req.URL.Path)
		if req.Method == http.MethodPost {
			s.posts++
		}
		s.mu.Unlock()
		f := act
		if s.plan == nil {
			f = s.fault(global, onConn)
		}
		switch f {
		case "ok":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		case "ok-close":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
			finish(false, false)
			return
		case "ok-fin":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			finish(true, false)
			return
		case "ok-idle":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			c.SetReadDeadline(time.Now().Add(truthIdle))
			_, err := br.Peek(1)
			c.SetReadDeadline(time.Time{})
			if isTimeout(err) {
				finish(true, false)
				return
			}
		case "503", "500":
			io.WriteString(c, "HTTP/1.1 "+f+" Unavailable\r\nContent-Length: 0\r\n\r\n")
		case "stall":
			_, err := br.ReadByte() // until the client goes
			peer(err)
			return
		case "close":
			setBy("server")
			return
		case "reset":
			setBy("server")
			c.(*net.TCPConn).SetLinger(0)
			return
		case "truncate":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			setBy("server")
			return
		}
	}
}

// measured is one client's behaviour on one case: what the caller got
// (one line per call), the requests the server saw, the connections, the
// requests on each, and how each closed; the POSTs the server read, the
// requests it left unread, and (where the case has a gate) whether the
// client closed its side of the connection the server closed before it
// went on.
type measured struct {
	caller   []string
	requests int
	conns    []int
	closed   []string
	posts    int
	unread   int
	noticed  string // whether the client closed its first connection by the gate's answer: "yes", "no", "" (no gate)
}

func (m measured) String() string {
	s := fmt.Sprintf("caller %q, %d requests, conns %v, closed %v", m.caller, m.requests, m.conns, m.closed)
	if m.posts > 0 || m.unread > 0 || m.noticed != "" {
		s += fmt.Sprintf(", posts %d, unread %d", m.posts, m.unread)
	}
	if m.noticed != "" {
		s += ", client had closed conn 1 at the gate: " + m.noticed
	}
	return s
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// truthCases are the faults of the catalogue, as the raw server plays
// them: the fault given to each request, by its number overall and on its
// connection.
var truthCases = map[string]func(global, onConn int) string{
	"stall":       func(int, int) string { return "stall" },
	"503-503-200": func(g, _ int) string { return map[bool]string{true: "503", false: "ok"}[g <= 2] },
	"disconnect":  func(int, int) string { return "close" },
	// The first request on each connection is answered, the second's
	// connection closed once it is read.
	"keepalive-disconnect": func(_, c int) string { return map[bool]string{true: "ok", false: "close"}[c == 1] },
	"reset":                func(int, int) string { return "reset" },
	"truncate":             func(int, int) string { return "truncate" },
	"post-503":             func(int, int) string { return "503" },
	// With the client's retries on, as for 503-503-200.
	"500-retry":   func(int, int) string { return "500" },
	"stall-retry": func(int, int) string { return "stall" },
}

// clientCmd returns the command that drives client on kase against url,
// or skips the test when the client is not installed.
func clientCmd(t *testing.T, client, kase, url string) *exec.Cmd {
	t.Helper()
	root, _ := filepath.Abs("..")
	switch client {
	case "curl":
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl is not installed (.ci/run installs it)")
		}
		// The bound: 200 ms where the fault stalls, 5 s elsewhere.
		bound := "5"
		if strings.HasPrefix(kase, "stall") {
			bound = "0.2"
		}
		w := []string{"-s", "-o", "/dev/null", "-w", "%{http_code} %{exitcode}\n", "--max-time", bound}
		args := append([]string{}, w...)
		switch kase {
		case "503-503-200", "500-retry", "stall-retry":
			args = append(args, "--retry", "2", "--retry-delay", "1")
		case "post-503":
			args = append(args, "--retry", "2", "--retry-delay", "1", "-X", "POST", "--data", `{"order":7}`)
		}
		args = append(args, url)
		if kase == "keepalive-disconnect" {
			args = append(args, "--next")
			args = append(args, w...)
			args = append(args, url)
		}
		return exec.Command("curl", args...)
	case "requests", "httpx":
		py := pythonPath(t, root)
		return exec.Command(py, filepath.Join("testdata", "truth", "driver.py"), client, kase, url)
	case "fetch", "axios":
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip("node is not installed (.ci/run installs it)")
		}
		kit := nodeKit(t, root)
		cmd := exec.Command("node", filepath.Join("testdata", "truth", "driver.mjs"), client, kase, url)
		cmd.Env = append(os.Environ(), "CONNAUDIT_NODE_KIT="+kit)
		return cmd
	}
	t.Fatalf("unknown client %s", client)
	return nil
}

// pythonPath is the Python with the kit's pinned packages: $CONNAUDIT_PYTHON,
// or kits/python/.venv's.
func pythonPath(t *testing.T, root string) string {
	t.Helper()
	py := os.Getenv("CONNAUDIT_PYTHON")
	if py == "" {
		py = filepath.Join(root, "kits", "python", ".venv", "bin", "python")
	}
	if err := exec.Command(py, "-c", "import requests, httpx, aiohttp").Run(); err != nil {
		t.Skipf("no Python with requests, httpx and aiohttp at %s (set CONNAUDIT_PYTHON; .ci/run makes kits/python/.venv)", py)
	}
	return py
}

// nodeKit is kits/node, with its pinned packages installed.
func nodeKit(t *testing.T, root string) string {
	t.Helper()
	kit := filepath.Join(root, "kits", "node")
	if _, err := os.Stat(filepath.Join(kit, "node_modules", "axios-retry")); err != nil {
		t.Skip("kits/node/node_modules is not installed (.ci/run runs npm ci there)")
	}
	return kit
}

// measure runs client on kase against a fresh raw server.
func measure(t *testing.T, client, kase string) measured {
	t.Helper()
	s := &truthServer{fault: truthCases[kase]}
	return s.run(t, client, kase, func(url, _ string) *exec.Cmd { return clientCmd(t, client, kase, url) })
}

// run serves s on a raw listener, with a gate on a listener of its own,
// runs the command cmd makes of the fault URL and the gate's, and returns
// what s saw. The gate (GET) answers once the server closed a connection
// of its own accord and the client closed its side, or a second after
// that close: a client's way to wait for the close, through a client of
// its own (its requests are not counted). With ?wait=D it answers after D
// instead (at most 8 s), the client's idle time, noting whether the client
// had closed its first connection by then.
func (s *truthServer) run(t *testing.T, client, kase string, cmd func(url, gate string) *exec.Cmd) measured {
	t.Helper()
	s.finned, s.gone = make(chan struct{}), make(chan struct{})
	// The accept loop counts a connection as served before its goroutine
	// starts, so that once the loop has ended no connection is missed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.active++
			tc := &truthConn{n: len(s.conns) + 1}
			s.conns = append(s.conns, tc)
			s.mu.Unlock()
			go func() {
				defer c.Close()
				s.serve(c, tc)
			}()
		}
	}()
	var noticed sync.Map
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil {
			// The client's idle time: then whether it closed its first
			// connection meanwhile, by itself.
			idle := time.NewTimer(min(wait, 8*time.Second))
			defer idle.Stop()
			select {
			case <-idle.C:
			case <-ctx.Done():
			}
			s.mu.Lock()
			v := "no"
			if len(s.conns) > 0 && strings.HasPrefix(s.conns[0].closedBy, "client") {
				v = "yes"
			}
			s.mu.Unlock()
			noticed.Store("gate", v)
			io.WriteString(w, "ok")
			return
		}
		select {
		case <-s.finned:
		case <-ctx.Done():
			http.Error(w, "the server closed no connection", http.StatusGatewayTimeout)
			return
		}
		bound := time.NewTimer(time.Second)
		defer bound.Stop()
		select {
		case <-s.gone:
			noticed.Store("gate", "yes")
		case <-bound.C:
			noticed.Store("gate", "no")
		case <-ctx.Done():
		}
		io.WriteString(w, "ok")
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		gate.Serve(gln)
	}()
	defer func() {
		gate.Close()
		<-served
	}()
	url := "http://" + ln.Addr().String() + "/fault"
	c := cmd(url, "http://"+gln.Addr().String()+"/gate")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-ctx.Done():
		c.Process.Kill()
		<-done
		t.Fatalf("%s %s: no end within 60s: %s", client, kase, out.String())
	}
	// The client process is gone: every connection it had is closed, and
	// the server's goroutines see it and end.
	ln.Close()
	<-accepting
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if err := notify.Wait(wctx, &s.mu, &s.changes, func() bool { return s.active == 0 }); err != nil {
		t.Fatalf("%s %s: the server still serves a connection of the exited client", client, kase)
	}
	var m measured
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "Warning") {
			m.caller = append(m.caller, l)
		}
	}
	if v, ok := noticed.Load("gate"); ok {
		m.noticed = v.(string)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.requests, m.posts, m.unread = s.n, s.posts, s.unread
	for _, c := range s.conns {
		if len(c.requests) == 0 && c.closedBy == "client-fin" {
			continue // a connection opened and closed unused (a client's spare)
		}
		m.conns = append(m.conns, len(c.requests))
		m.closed = append(m.closed, c.closedBy)
	}
	return m
}

// curlCode turns curl's "-w '%{http_code} %{exitcode}'" line into the
// form of the drivers' lines.
func curlCode(line string) string {
	f := strings.Fields(line)
	if len(f) == 2 && f[1] == "0" {
		return "status " + f[0]
	}
	if len(f) == 2 {
		n, _ := strconv.Atoi(f[1])
		return fmt.Sprintf("error curl(%d)", n)
	}
	return line
}
