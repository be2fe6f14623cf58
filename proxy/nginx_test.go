package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// startNginx starts nginx on 127.0.0.1 (one process, no master), its
// access log saying each request's $connection and $connection_requests,
// the upstream's own truth; it skips the test without nginx. It returns
// its URL and a function that stops it (SIGQUIT: the log complete) and
// returns the log's lines.
func startNginx(t *testing.T) (string, func() []string) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			t.Skip("nginx not installed: run .ci/services (apt-get install nginx-light) to run the real-server tests")
		}
		bin = "/usr/sbin/nginx"
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	logPath := filepath.Join(dir, "access.log")
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
	log_format truth '$connection $connection_requests $status';
	access_log %[3]s truth;
	client_body_temp_path %[2]s/client_body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	keepalive_requests 1000;
	server {
		listen %[4]s;
		location / { return 200 "ok"; }
	}
}
`, user, dir, logPath, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o600))
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "getrlimit") && !signalled {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-testkit.Bounded(t).Done():
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("nginx did not start")
	}
	stopped := false
	stop := func() []string {
		if !stopped {
			stopped = true
			quit(t, cmd)
		}
		b, err := os.ReadFile(logPath)
		require.NoError(t, err)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	t.Cleanup(func() { stop() })
	return "http://" + addr, stop
}

// Three clients through the proxy to nginx: curl (one invocation, three
// URLs: one connection), Python requests (a Session, four requests) and
// Go's client (five requests). The proxy's count of each client's
// connections and requests equals the client's own, and its upstream
// pool's equals nginx's access log ($connection, $connection_requests).
func TestNginxTruth(t *testing.T) {
	upURL, stop := startNginx(t)
	p := start(t, upURL, proxy.ClientHeader("X-Client"))
	ctx := testkit.Bounded(t)

	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.CommandContext(ctx, curl, "-s", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null",
			"-H", "X-Client: curl", "-w", "%{num_connects}\n", p.URL()+"/a", p.URL()+"/b", p.URL()+"/c").Output()
		require.NoError(t, err)
		// curl's own count: a new connection for the first URL only.
		require.Equal(t, "1\n0\n0\n", string(out))
	} else {
		t.Log("curl not installed: its part is skipped")
	}
	py, noPy := pythonWithRequests()
	hasPy := noPy == nil
	if hasPy {
		script := `import sys, requests
s = requests.Session()
for i in range(4):
    r = s.get(sys.argv[1] + "/p", headers={"X-Client": "requests"})
    assert r.status_code == 200
pm = s.get_adapter(sys.argv[1]).poolmanager
pools = [pm.pools[k] for k in pm.pools.keys()]
print(sum(p.num_connections for p in pools), sum(p.num_requests for p in pools))
s.close()
`
		out, err := exec.CommandContext(ctx, py, "-c", script, p.URL()).Output()
		require.NoError(t, err)
		// urllib3's own counts: connections made, requests sent.
		require.Equal(t, "1 4\n", string(out))
	} else {
		t.Logf("%v: the Python part is skipped", noPy)
	}
	g := newGoClient(t, nil)
	for range 5 {
		status, err := g.do(t, "GET", p.URL()+"/g", nil, "X-Client", "go")
		require.NoError(t, err)
		require.Equal(t, 200, status)
	}
	g.tr.CloseIdleConnections()
	require.NoError(t, proxy.WaitFor(ctx, p, func(c proxy.Counts) bool { return c.Open == 0 }))
	p.Close()
	rep := p.Report()
	want := map[string][2]int{"go": {int(g.dials.Load()), 5}}
	if _, err := exec.LookPath("curl"); err == nil {
		want["curl"] = [2]int{1, 3}
	}
	if hasPy {
		want["requests"] = [2]int{1, 4}
	}
	total := 0
	for name, w := range want {
		c := client(t, rep, name)
		require.Equal(t, w[0], c.Conns, name)
		require.Equal(t, w[1], c.Requests, name)
		require.Equal(t, w[1]-w[0], c.Reused, name)
		require.Equal(t, map[string]int{"client: client-close": w[0]}, c.Closes, name)
		total += w[1]
	}
	// nginx's truth: its connections and each one's requests.
	lines := stop()
	perConn := map[string]int{}
	for _, l := range lines {
		f := strings.Fields(l)
		require.Len(t, f, 3, l)
		require.Equal(t, "200", f[2])
		perConn[f[0]]++
	}
	require.Len(t, lines, total)
	require.Equal(t, len(perConn), rep.Pool.Conns)
	require.Equal(t, total, rep.Pool.Requests)
	var fromPool, fromNginx []int
	for _, c := range rep.Pool.List {
		fromPool = append(fromPool, c.Requests)
	}
	for _, n := range perConn {
		fromNginx = append(fromNginx, n)
	}
	require.ElementsMatch(t, fromNginx, fromPool)
	t.Logf("clients: %+v; upstream: %d conns, %d requests; nginx: %d conns, %d requests",
		want, rep.Pool.Conns, rep.Pool.Requests, len(perConn), len(lines))
}

// quit stops nginx gracefully (SIGQUIT: it finishes, and logs, the
// requests it has) and waits for it. nginx reads a signal in its event
// loop: one that arrives before it first blocks there (it has just
// started) is seen at its next event, which may never come, so the signal
// is sent again until it exits; after 10 s it is killed and the test fails.
func quit(t *testing.T, cmd *exec.Cmd) {
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	again := time.NewTicker(100 * time.Millisecond)
	defer again.Stop()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	for {
		select {
		case <-exited:
			return
		case <-again.C:
			_ = cmd.Process.Signal(syscall.SIGQUIT)
		case <-bound.C:
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("nginx did not quit within 10s of SIGQUIT")
			return
		}
	}
}
