package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// ruleStep is one request of a client's sequence: "GET /1", or "wait GET
// /2" (the test waits for the rule's signal, then lets the client send it).
type ruleStep struct {
	method, path string
	wait         bool
}

func ruleSteps(s string) []ruleStep {
	var out []ruleStep
	for _, f := range strings.Split(s, ", ") {
		st := ruleStep{}
		if rest, ok := strings.CutPrefix(f, "wait "); ok {
			st.wait, f = true, rest
		}
		st.method, st.path, _ = strings.Cut(f, " ")
		out = append(out, st)
	}
	return out
}

// postBody is every POST's body: the write the rules lose.
const postBody = `{"order":1}`

// ruleSeen is what one client did under one rule, as the proxy, nginx
// and the client itself saw it.
type ruleSeen struct {
	Proxy  int    // requests the proxy read from the client
	Nginx  int    // requests nginx served (its access log)
	Conns  int    // connections the proxy accepted from the client
	Own    int    // connections the client says it opened
	Hidden int    // replays the proxy linked as hidden retries
	Twice  int    // replays the proxy linked as writes committed twice
	Got    string // what the caller got at each step
}

// ruleCase is one rule, the requests each client sends under it, and what
// each client did (measured, then pinned).
type ruleCase struct {
	rule   string
	h2     bool                    // over TLS, HTTP/2 offered
	steps  string                  // see ruleSteps
	signal func(proxy.Counts) bool // what a "wait" step waits for
	// connsRace: one connection (the client's own count too) is taken
	// for the two pinned; see the goaway case.
	connsRace bool
	want      map[string]ruleSeen // by client: curl, requests, go
}

// ruleRunner runs a client through the steps to the proxy; release waits
// for the rule's signal. It returns what the caller got at each step and
// the connections the client says it opened.
type ruleRunner func(t *testing.T, p *proxy.Proxy, steps []ruleStep, release func() error) ([]string, int)

// One fault rule of each kind, and what each of three clients did under
// it, each configured as a service would be: curl (one invocation, a
// transfer per step, kept alive between them, --max-time 2), Python
// requests (a Session, its default adapter: no Retry; timeout=(1, 2)) and
// Go's net/http (a Client with Timeout 2s, its Transport's dial and TLS
// handshake bounded at 1s), each through the proxy to nginx. The counts
// are pinned: a client or the proxy that changes its behaviour fails it.
// docs/proxy.md shows the table.
func TestRuleKindsThreeClients(t *testing.T) {
	get4 := "GET /1, GET /2, GET /3, GET /4"
	post := "GET /1, GET /2, POST /3, GET /4"
	idleClosed := func(c proxy.Counts) bool { return c.Faults >= 1 && c.Open == 0 }
	dark := func(c proxy.Counts) bool { return c.Faults >= 1 }
	cases := []ruleCase{
		// Before the upstream: the 3rd request of a kept-alive connection
		// is read, then its connection reset (RST) or closed (FIN). curl
		// and Go send the GET again on a new connection, unseen by the
		// caller: a hidden retry; requests gives its caller the error.
		{rule: "reset nth=3", steps: get4, want: map[string]ruleSeen{
			"curl":     {Proxy: 5, Nginx: 4, Conns: 2, Own: 2, Hidden: 1, Got: "200 200 200 200"},
			"requests": {Proxy: 4, Nginx: 3, Conns: 2, Own: 2, Got: "200 200 ERR:ConnectionError 200"},
			"go":       {Proxy: 5, Nginx: 4, Conns: 2, Own: 2, Hidden: 1, Got: "200 200 200 200"},
		}},
		{rule: "close nth=3", steps: get4, want: map[string]ruleSeen{
			"curl":     {Proxy: 5, Nginx: 4, Conns: 2, Own: 2, Hidden: 1, Got: "200 200 200 200"},
			"requests": {Proxy: 4, Nginx: 3, Conns: 2, Own: 2, Got: "200 200 ERR:ConnectionError 200"},
			"go":       {Proxy: 5, Nginx: 4, Conns: 2, Own: 2, Hidden: 1, Got: "200 200 200 200"},
		}},
		// After the upstream: nginx processed the POST, its response is
		// lost. curl sends it again on a new connection (a reused
		// connection that died before any response byte is retried,
		// whatever the method): the write is committed twice and its
		// caller never knows. Go and requests give their caller the error.
		{rule: "reset at=after-upstream method=POST times=1", steps: post, want: map[string]ruleSeen{
			"curl":     {Proxy: 5, Nginx: 5, Conns: 2, Own: 2, Twice: 1, Got: "200 200 200 200"},
			"requests": {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:ConnectionError 200"},
			"go":       {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:reset 200"},
		}},
		{rule: "close at=after-upstream method=POST times=1", steps: post, want: map[string]ruleSeen{
			"curl":     {Proxy: 5, Nginx: 5, Conns: 2, Own: 2, Twice: 1, Got: "200 200 200 200"},
			"requests": {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:ConnectionError 200"},
			"go":       {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:EOF 200"},
		}},
		// None of the three, so configured, retries a 503.
		{rule: "status=503 times=2", steps: "GET /1, GET /2, GET /3", want: map[string]ruleSeen{
			"curl":     {Proxy: 3, Nginx: 1, Conns: 1, Own: 1, Got: "503 503 200"},
			"requests": {Proxy: 3, Nginx: 1, Conns: 1, Own: 1, Got: "503 503 200"},
			"go":       {Proxy: 3, Nginx: 1, Conns: 1, Own: 1, Got: "503 503 200"},
		}},
		// Each client's bound ends the held request and its connection;
		// none sends it again.
		{rule: "delay-headers=30s nth=3", steps: get4, want: map[string]ruleSeen{
			"curl":     {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:exit-28 200"},
			"requests": {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:ReadTimeout 200"},
			"go":       {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:timeout 200"},
		}},
		// requests raises ConnectionError, not ReadTimeout, for a read
		// timeout in the body; urllib3 connects its connection object
		// again for the 4th request and counts no new connection.
		{rule: "stall-body=1 nth=3", steps: get4, want: map[string]ruleSeen{
			"curl":     {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:exit-28 200"},
			"requests": {Proxy: 4, Nginx: 4, Conns: 2, Own: 1, Got: "200 200 ERR:ConnectionError 200"},
			"go":       {Proxy: 4, Nginx: 4, Conns: 2, Own: 2, Got: "200 200 ERR:timeout 200"},
		}},
		// The connection closed while idle: each client sees it and
		// takes a new one, no request lost (curl's 2nd is a PUT: see
		// curlRun). Go may also take the closed connection before its
		// read loop saw the close: it then sends again on a new one,
		// unseen by the proxy (the first write met a closed socket); the
		// counts are the same either way. urllib3 again counts one.
		{rule: "idle-close=100ms", steps: "GET /1, wait GET /2", signal: idleClosed, want: map[string]ruleSeen{
			"curl":     {Proxy: 2, Nginx: 2, Conns: 2, Own: 2, Got: "200 200"},
			"requests": {Proxy: 2, Nginx: 2, Conns: 2, Own: 1, Got: "200 200"},
			"go":       {Proxy: 2, Nginx: 2, Conns: 2, Own: 2, Got: "200 200"},
		}},
		// The dark connection swallows the 2nd request (the proxy never
		// reads it); each client's bound ends it, and the 3rd goes on a
		// new connection.
		{rule: "go-dark=100ms", steps: "GET /1, wait GET /2, GET /3", signal: dark, want: map[string]ruleSeen{
			"curl":     {Proxy: 2, Nginx: 2, Conns: 2, Own: 2, Got: "200 ERR:exit-28 200"},
			"requests": {Proxy: 2, Nginx: 2, Conns: 2, Own: 2, Got: "200 ERR:ReadTimeout 200"},
			"go":       {Proxy: 2, Nginx: 2, Conns: 2, Own: 2, Got: "200 ERR:timeout 200"},
		}},
		// HTTP/2: the GOAWAY goes out as the 2nd request is forwarded;
		// both clients take a new connection for the 3rd. Whether the
		// GOAWAY or the 2nd response reaches the client first is a race
		// (the proxy's Shutdown runs on goroutines of its own): a client
		// may send the 3rd on the first connection, served there or
		// sent again after the GOAWAY; so one connection is accepted
		// too, and the rest is pinned.
		{rule: "goaway nth=2", h2: true, steps: "GET /1, GET /2, GET /3", connsRace: true, want: map[string]ruleSeen{
			"curl": {Proxy: 3, Nginx: 3, Conns: 2, Own: 2, Got: "200 200 200"},
			"go":   {Proxy: 3, Nginx: 3, Conns: 2, Own: 2, Got: "200 200 200"},
		}},
	}
	runners := []struct {
		name string
		run  ruleRunner
	}{{"curl", curlRun}, {"requests", requestsRun}, {"go", goRun}}
	for _, c := range cases {
		for _, r := range runners {
			t.Run(c.rule+"/"+r.name, func(t *testing.T) {
				if c.h2 && r.name == "requests" {
					t.Skip("requests speaks HTTP/1.1 alone: a goaway rule never touches it")
				}
				seen := runRuleCase(t, c, r.run)
				t.Logf("measured %-45s %-8s %+v", c.rule, r.name, seen)
				want, ok := c.want[r.name]
				require.True(t, ok, "no expectation for %s under %q", r.name, c.rule)
				if c.connsRace && seen.Conns == 1 && seen.Own == 1 {
					t.Logf("one connection: the race the case's comment names")
					seen.Conns, seen.Own = want.Conns, want.Own
				}
				require.Equal(t, want, seen)
			})
		}
	}
}

// runRuleCase runs one client under one rule through a proxy of its own
// to an nginx of its own, and returns what each end saw.
func runRuleCase(t *testing.T, c ruleCase, run ruleRunner) ruleSeen {
	upURL, stop := startNginx(t)
	opts := []proxy.Option{rules(t, c.rule)}
	if c.h2 {
		opts = append(opts, proxy.DownstreamTLS())
	}
	p := start(t, upURL, opts...)
	release := func() error {
		if c.signal == nil {
			return errors.New("the case has no signal to wait for")
		}
		return proxy.WaitFor(testkit.Bounded(t), p, c.signal)
	}
	got, own := run(t, p, ruleSteps(c.steps), release)
	// The client is done: what it sent was read or is lost. Close ends a
	// connection gone dark too, which nothing else ends; the report is
	// final.
	p.Close()
	rep := p.Report()
	nginx := 0
	for _, l := range stop() {
		if l != "" {
			nginx++
		}
	}
	cl := client(t, rep, "127.0.0.1")
	seen := ruleSeen{Proxy: cl.Requests, Nginx: nginx, Conns: cl.Conns, Own: own, Got: strings.Join(got, " ")}
	for _, rp := range rep.Replays {
		switch rp.Class {
		case "hidden-retry":
			seen.Hidden++
		case "write-committed-twice":
			seen.Twice++
		}
	}
	require.Equal(t, seen.Twice > 0, verdict(t, rep, "write-committed-twice", "127.0.0.1").Result == "fail")
	t.Logf("closes %v, statuses %v, upstream pool %d conns %d requests", cl.Closes, cl.Statuses, rep.Pool.Conns, rep.Pool.Requests)
	return seen
}

// goRun is Go's client: a Client with a 2s Timeout over a Transport
// whose dial and TLS handshake are bounded at 1s.
func goRun(t *testing.T, p *proxy.Proxy, steps []ruleStep, release func() error) ([]string, int) {
	c := newGoClient(t, p.CA())
	c.Timeout = 2 * time.Second
	dial := c.tr.DialContext
	c.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return dial(ctx, network, addr)
	}
	c.tr.TLSHandshakeTimeout = time.Second
	c.tr.IdleConnTimeout = 90 * time.Second
	var got []string
	for _, s := range steps {
		if s.wait {
			require.NoError(t, release())
		}
		var body io.Reader
		if s.method == "POST" {
			body = strings.NewReader(postBody)
		}
		status, err := c.do(t, s.method, p.URL()+s.path, body)
		if err != nil {
			t.Logf("go: %s %s: %v", s.method, s.path, err)
			got = append(got, "ERR:"+goErrClass(err))
			continue
		}
		got = append(got, fmt.Sprint(status))
	}
	c.tr.CloseIdleConnections()
	return got, int(c.dials.Load())
}

// goErrClass names an error of Go's client by its kind.
func goErrClass(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	}
	return err.Error()
}

// requestsScript runs the steps (JSON, argv[2]) against argv[1] with a
// requests Session and its default adapter, reading a line of stdin
// before each step that waits; it prints each step's status or its
// error's class, then the connections urllib3 opened.
const requestsScript = `import json, sys, requests
base, steps = sys.argv[1], json.loads(sys.argv[2])
s = requests.Session()
for method, path, wait in steps:
    if wait:
        sys.stdin.readline()
    try:
        data = ` + "'" + postBody + "'" + ` if method == "POST" else None
        r = s.request(method, base + path, data=data, timeout=(1, 2))
        print(r.status_code, flush=True)
    except requests.RequestException as e:
        print("ERR:" + type(e).__name__, flush=True)
        print(method, path, repr(e), file=sys.stderr)
pm = s.get_adapter(base).poolmanager
print("conns", sum(pm.pools[k].num_connections for k in pm.pools.keys()))
s.close()
`

// pythonWithRequests is $CONNAUDIT_PYTHON, or the repository's
// kits/python/.venv, when it has requests; an error saying why not.
var pythonWithRequests = sync.OnceValues(func() (string, error) {
	py := os.Getenv("CONNAUDIT_PYTHON")
	if py == "" {
		py = filepath.Join("..", "kits", "python", ".venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		return "", fmt.Errorf("no Python at %s (set CONNAUDIT_PYTHON to a Python with requests; .ci/run makes kits/python/.venv): %w", py, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", "import requests").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s has no requests: %v: %s", py, err, out)
	}
	return py, nil
})

// requestsRun is Python requests: a Session, its default adapter (no
// Retry), timeout=(1, 2).
func requestsRun(t *testing.T, p *proxy.Proxy, steps []ruleStep, release func() error) ([]string, int) {
	py, err := pythonWithRequests()
	if err != nil {
		t.Skip(err)
	}
	var plan [][]any
	for _, s := range steps {
		plan = append(plan, []any{s.method, s.path, s.wait})
	}
	js, err := json.Marshal(plan)
	require.NoError(t, err)
	cmd := exec.CommandContext(testkit.Bounded(t), py, "-c", requestsScript, p.URL(), string(js))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	for _, s := range steps {
		if s.wait {
			if waitErr = release(); waitErr != nil {
				break
			}
			_, _ = io.WriteString(stdin, "\n")
		}
	}
	stdin.Close()
	err = cmd.Wait()
	t.Logf("requests' stderr: %s", stderr.String())
	require.NoError(t, waitErr)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, len(steps)+1, stdout.String())
	var own int
	_, err = fmt.Sscanf(lines[len(steps)], "conns %d", &own)
	require.NoError(t, err, stdout.String())
	return lines[:len(steps)], own
}

// curlRun is curl: one invocation, a transfer per step (--next), each
// with --connect-timeout 1 and --max-time 2, kept alive between them. A
// step that waits is a PUT whose body curl reads from a FIFO, which curl
// opens only when that transfer starts: the open waits until the test,
// given its signal, opens the FIFO's other end. It is the one way to hold
// curl between two transfers of one invocation on a signal.
func curlRun(t *testing.T, p *proxy.Proxy, steps []ruleStep, release func() error) ([]string, int) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	dir := t.TempDir()
	var tlsArgs []string
	if ca := p.CA(); ca != nil {
		out, err := exec.Command(curl, "--version").Output()
		require.NoError(t, err)
		if !strings.Contains(string(out), "HTTP2") {
			t.Skip("this curl has no HTTP/2")
		}
		caFile := filepath.Join(dir, "ca.pem")
		require.NoError(t, os.WriteFile(caFile, ca, 0o600))
		tlsArgs = []string{"--http2", "--cacert", caFile}
	}
	fifo := filepath.Join(dir, "body")
	var args []string
	for i, s := range steps {
		if i > 0 {
			args = append(args, "--next")
		}
		args = append(args, "-s", "-S", "-o", "/dev/null", "--connect-timeout", "1", "--max-time", "2",
			"-w", "%{http_code} %{exitcode} %{num_connects}\\n")
		args = append(args, tlsArgs...)
		switch {
		case s.wait:
			if _, err := os.Stat(fifo); err != nil {
				require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			}
			args = append(args, "-T", fifo, "-H", "Expect:")
		case s.method == "POST":
			args = append(args, "--data-binary", postBody)
		}
		args = append(args, p.URL()+s.path)
	}
	cmd := exec.CommandContext(testkit.Bounded(t), curl, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var feedErr error
	for _, s := range steps {
		if s.wait {
			if feedErr = release(); feedErr != nil {
				break
			}
			if feedErr = feedFIFO(fifo, exited); feedErr != nil {
				break
			}
		}
	}
	<-exited
	t.Logf("curl's stderr: %s", stderr.String())
	require.NoError(t, feedErr)
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		require.NoError(t, waitErr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, len(steps), stdout.String())
	var got []string
	own := 0
	for _, l := range lines {
		var code, exit string
		var connects int
		_, err := fmt.Sscanf(l, "%s %s %d", &code, &exit, &connects)
		require.NoError(t, err, l)
		own += connects
		if exit != "0" {
			got = append(got, "ERR:exit-"+exit)
			continue
		}
		got = append(got, code)
	}
	return got, own
}

// feedFIFO writes a byte to the FIFO curl opens at its transfer's start,
// and closes it: the open waits for curl's; if curl exits first, the
// test opens the reading end itself to free it.
func feedFIFO(path string, exited <-chan struct{}) error {
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("x")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-exited:
		r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		<-done
		r.Close()
		return errors.New("curl exited before it read the body of the step that waits")
	}
}
