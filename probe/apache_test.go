package probe_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
)

// apache is an Apache httpd the test started on 127.0.0.1.
type apache struct {
	*daemon
	URL       string
	accessLog string
}

// apacheBinary returns the path of Apache httpd and of its modules, or
// skips the test saying why.
func apacheBinary(t *testing.T) (bin, modules string) {
	t.Helper()
	for _, b := range []string{"apache2", "httpd"} {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	for _, p := range []string{"/usr/sbin/apache2", "/usr/sbin/httpd"} {
		if _, err := os.Stat(p); bin == "" && err == nil {
			bin = p
		}
	}
	for _, m := range []string{"/usr/lib/apache2/modules", "/usr/lib64/httpd/modules", "/usr/lib/httpd/modules"} {
		if _, err := os.Stat(filepath.Join(m, "mod_mpm_event.so")); err == nil {
			modules = m
			break
		}
	}
	if bin == "" || modules == "" {
		t.Skip("Apache httpd not installed: run .ci/services (apt-get install apache2) to run the Apache tests")
	}
	return bin, modules
}

// startApache starts Apache httpd in the foreground, with
// a temporary configuration that serves "ok" at /ok with keep-alive and the
// directives given, and logs each request with the client's port (one per
// connection) and the connection's request count. Its error log goes to
// stderr, which the test reads for the line that says it serves. It is
// stopped at the end of the test.
func startApache(t *testing.T, directives string) *apache {
	t.Helper()
	bin, modules := apacheBinary(t)
	// A directory of its own, readable by the user Apache serves as.
	dir, err := os.MkdirTemp("", "probe-apache-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	www := filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(www, "ok"), []byte("ok"), 0o644))
	addr := testserver.FreePort(t)
	a := &apache{
		URL:       "http://" + addr + "/ok",
		accessLog: filepath.Join(dir, "access.log"),
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "User nobody\nGroup nogroup"
	}
	conf := fmt.Sprintf(`ServerRoot %[1]s
LoadModule mpm_event_module %[2]s/mod_mpm_event.so
LoadModule log_config_module %[2]s/mod_log_config.so
LoadModule authz_core_module %[2]s/mod_authz_core.so
%[3]s
ServerName 127.0.0.1
Listen %[4]s
PidFile %[1]s/httpd.pid
ErrorLog /dev/stderr
LogLevel notice
LogFormat "%%{remote}p %%k %%>s" probe
CustomLog %[5]s probe
DocumentRoot %[6]s
<Directory />
	Require all granted
</Directory>
KeepAlive On
%[7]s
`, dir, modules, user, addr, a.accessLog, www, directives)
	if _, err := os.Stat(filepath.Join(modules, "mod_log_config.so")); err != nil {
		// Built in, as Debian builds it.
		conf = strings.Replace(conf, "LoadModule log_config_module "+modules+"/mod_log_config.so\n", "", 1)
	}
	confPath := filepath.Join(dir, "httpd.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))

	// In the foreground, a process group of its own.
	cmd := exec.Command(bin, "-DFOREGROUND", "-f", confPath)
	cmd.Env = append(os.Environ(), "APACHE_RUN_DIR="+dir, "APACHE_LOCK_DIR="+dir, "APACHE_LOG_DIR="+dir)
	a.daemon = startDaemon(t, "apache", cmd, "resuming normal operations")
	return a
}

// quit stops Apache gracefully (SIGWINCH: it finishes the requests it
// has, and logs them), so that its access log is complete.
func (a *apache) quit(t *testing.T) {
	t.Helper()
	a.daemon.quit(t, syscall.SIGWINCH)
}

// requests reads the access log once Apache stopped: the requests it
// processed, and the connections (client ports) that carried them.
func (a *apache) requests(t *testing.T) (requests, conns int) {
	t.Helper()
	b, err := os.ReadFile(a.accessLog)
	require.NoError(t, err, a.diagnose())
	ports := map[string]bool{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 3, "access log line %q", l)
		require.Equal(t, "200", f[2], "access log line %q", l)
		ports[f[0]] = true
		requests++
	}
	return requests, len(ports)
}

// TestApacheKeepAliveTimeout probes Apache with KeepAliveTimeout 1 and a
// gap of as long between requests: each request meets a connection Apache
// is closing, or has closed, as idle. Apache's log shows each request
// processed once, so the report has no possibly processed retry; the
// dials are the connections that carried a request; and Apache's own
// Keep-Alive header is reported and compared with the client's idle
// timeout.
func TestApacheKeepAliveTimeout(t *testing.T) {
	t.Parallel()
	a := startApache(t, "KeepAliveTimeout 1\nMaxKeepAliveRequests 100")
	req, err := http.NewRequest(http.MethodGet, a.URL, nil)
	require.NoError(t, err)
	// Apache states its keep-alive limits (Keep-Alive: timeout=1, max=100)
	// to a client that asks for keep-alive.
	req.Header.Set("Connection", "keep-alive")
	rep, err := probe.Run(t.Context(), req, probe.Requests(6), probe.Gap(time.Second), probe.Deadline(guard))
	require.NoError(t, err, a.diagnose())
	require.Equal(t, 6, rep.Outcomes[vocab.ClassOK], "%+v", rep.Failures)
	require.Zero(t, rep.HiddenRetriesPossiblyProcessed, "not processed: %v", rep.HiddenRetriesWhy)
	require.NotContains(t, ids(rep), "hidden-retries")
	require.Equal(t, time.Second, rep.KeepAlive.Timeout, "Keep-Alive: %q", rep.KeepAlive.Header)
	require.Contains(t, ids(rep), "server-idle-shorter-than-client")
	a.quit(t)
	requests, conns := a.requests(t)
	require.Equal(t, 6, requests, "Apache processed each request once")
	require.EqualValues(t, rep.Dials-rep.DialErrors-rep.DialsAbandoned, conns, "%+v", rep.Connections)
	t.Logf("%d dials, %d hidden retries (not processed: %v), closes %v, Keep-Alive %q",
		rep.Dials, rep.HiddenRetries, rep.HiddenRetriesWhy, rep.ClosedBy, rep.KeepAlive.Header)
}
