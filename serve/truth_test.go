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
	requests []string // "GET /path", in order
	closedBy string   // "client-fin", "client-rst", "server"
}

// truthServer serves a fault per request on raw sockets and records.
type truthServer struct {
	fault   func(global, onConn int) string // "ok", "503", "stall", "close", "reset", "truncate"
	mu      sync.Mutex
	conns   []*truthConn
	n       int
	active  int // connections being served
	changes notify.Changes
}

func (s *truthServer) serve(c net.Conn) {
	s.mu.Lock()
	tc := &truthConn{}
	s.conns = append(s.conns, tc)
	s.mu.Unlock()
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
	for onConn := 1; ; onConn++ {
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
		s.mu.Unlock()
		switch f := s.fault(global, onConn); f {
		case "ok":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
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
// requests on each, and how each closed.
type measured struct {
	caller   []string
	requests int
	conns    []int
	closed   []string
}

func (m measured) String() string {
	return fmt.Sprintf("caller %q, %d requests, conns %v, closed %v", m.caller, m.requests, m.conns, m.closed)
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
	if err := exec.Command(py, "-c", "import requests, httpx").Run(); err != nil {
		t.Skipf("no Python with requests and httpx at %s (set CONNAUDIT_PYTHON; .ci/run makes kits/python/.venv)", py)
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
			s.mu.Unlock()
			go func() {
				defer c.Close()
				s.serve(c)
			}()
		}
	}()
	url := "http://" + ln.Addr().String() + "/fault"
	cmd := clientCmd(t, client, kase, url)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	m.requests = s.n
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
