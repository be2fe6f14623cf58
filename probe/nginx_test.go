package probe_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// nginx is an nginx the test started on 127.0.0.1.
type nginx struct {
	URL       string
	accessLog string
	cmd       *exec.Cmd
	ready     chan struct{} // closed once nginx listens
	exited    chan struct{} // closed when the process ended
	waitErr   error

	mu     sync.Mutex
	output strings.Builder // its error log (stderr)
}

// nginxBinary returns the path of nginx, or skips the test saying why.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("nginx"); err == nil {
		return bin
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("nginx not installed: run .ci/services (apt-get install nginx-light) to run the real-server tests")
	return ""
}

// startNginx starts nginx in the foreground, as one process (no master, so
// that killing it leaves no worker behind), with a temporary configuration
// whose http block gets directives, serving 200 "ok" on every path. Its
// error log goes to stderr, which the test reads: nginx logs its OS limits
// (getrlimit) once its listening sockets are open, so the test waits for
// that line instead of polling the port. It is killed and waited for at
// the end of the test.
func startNginx(t *testing.T, directives string) *nginx {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	addr := testserver.ClosedPort(t)
	n := &nginx{
		URL:       "http://" + addr,
		accessLog: filepath.Join(dir, "access.log"),
		ready:     make(chan struct{}),
		exited:    make(chan struct{}),
	}
	user := ""
	if os.Geteuid() == 0 {
		// As root nginx would switch to the "nobody" user, who cannot
		// write the temporary directory.
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
	log_format probe '$connection $connection_requests $status';
	access_log %[3]s probe;
	client_body_temp_path %[2]s/client_body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	%[4]s
	server {
		listen %[5]s;
		location / { return 200 "ok"; }
	}
}
`, user, dir, n.accessLog, directives, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o600))

	// -e: the error log before the configuration is read.
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	n.cmd = cmd
	go func() {
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			n.mu.Lock()
			n.output.WriteString(sc.Text() + "\n")
			n.mu.Unlock()
			if !announced && strings.Contains(sc.Text(), "getrlimit") {
				announced = true
				close(n.ready)
			}
		}
		n.waitErr = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(n.stop)
	select {
	case <-n.ready:
	case <-n.exited:
		t.Fatalf("nginx exited at start: %v\n%s", n.waitErr, n.diagnose())
	case <-time.After(guard):
		t.Fatalf("nginx did not start within %s\n%s", guard, n.diagnose())
	}
	return n
}

// stop kills nginx and waits for it to exit. Stopping twice is harmless.
func (n *nginx) stop() {
	n.cmd.Process.Kill()
	<-n.exited
}

// quit stops nginx gracefully (SIGQUIT: it finishes, and logs, the
// requests of the connections it has), so that its access log is complete;
// it kills it if it has not exited within the guard.
func (n *nginx) quit(t *testing.T) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGQUIT))
	select {
	case <-n.exited:
	case <-time.After(guard):
		n.stop()
		t.Fatalf("nginx did not quit within %s\n%s", guard, n.diagnose())
	}
}

// diagnose returns what nginx logged, for a failure message.
func (n *nginx) diagnose() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "nginx error log:\n" + n.output.String()
}

// connections reads the access log: the requests per connection serial
// number, as nginx counted them.
func (n *nginx) connections(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(n.accessLog)
	require.NoError(t, err, n.diagnose())
	defer f.Close()
	conns := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		require.Len(t, fields, 3, "access log line %q", sc.Text())
		conns[fields[0]]++
	}
	require.NoError(t, sc.Err())
	return conns
}

func probeNginx(t *testing.T, n *nginx, opts ...probe.Option) *probe.Report {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.URL+"/", nil)
	require.NoError(t, err)
	rep, err := probe.Run(t.Context(), req, append([]probe.Option{probe.Deadline(guard)}, opts...)...)
	require.NoError(t, err, n.diagnose())
	select {
	case <-n.exited:
		t.Fatalf("nginx exited during the probe: %v\n%s", n.waitErr, n.diagnose())
	default:
	}
	return rep
}

// TestNginxKeepaliveRequests audits a real server this project did not
// write: nginx with keepalive_requests 5.
func TestNginxKeepaliveRequests(t *testing.T) {
	t.Parallel()
	n := startNginx(t, "keepalive_requests 5;\n\tkeepalive_timeout 1s;")
	rep := probeNginx(t, n, probe.Requests(20), probe.FindMaxRequests(50))

	require.Equal(t, 20, rep.Requests)
	require.Equal(t, 20, rep.Outcomes["ok"], "%+v", rep.Failures)
	require.EqualValues(t, 4, rep.Dials, "ceil(20/5)")
	require.Equal(t, 1, rep.PerfectDials)
	requireConns(t, rep, 5, vocab.ClosedByServer, vocab.ReasonConnectionClose)
	m := rep.Discovery.MaxRequests
	require.True(t, m.Found, "%+v", m)
	require.Equal(t, 5, m.Limit)
	require.Equal(t, "connection-close", m.How)
	require.Equal(t, 5, m.Requests)
	requireFindings(t, rep, "server-closes-every-n")
	f, _ := rep.Has("server-closes-every-n")
	require.Contains(t, f.Message, "after 5 requests")

	// nginx's own count, from its access log once it stopped: one
	// connection per dial, five requests on each.
	n.quit(t)
	conns := n.connections(t)
	require.Len(t, conns, int(rep.Dials+rep.Discovery.Dials), "nginx connections = probe dials")
	for id, reqs := range conns {
		require.Equal(t, 5, reqs, "requests on nginx connection %s", id)
	}
}

// TestNginxNoKeepAlive: keepalive_timeout 0 makes nginx close every
// connection after its response.
func TestNginxNoKeepAlive(t *testing.T) {
	t.Parallel()
	n := startNginx(t, "keepalive_timeout 0;")
	rep := probeNginx(t, n, probe.Requests(4))
	require.Equal(t, 4, rep.Outcomes["ok"], "%+v", rep.Failures)
	require.EqualValues(t, 4, rep.Dials)
	requireConns(t, rep, 1, vocab.ClosedByServer, vocab.ReasonConnectionClose)
	requireFindings(t, rep, "no-keep-alive")
	n.quit(t)
	require.Len(t, n.connections(t), 4, "nginx connections = probe dials")
}
