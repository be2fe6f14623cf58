package probe_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	statusURL string      // its stub_status page, on a listener of its own
	tls       *tls.Config // trusts its certificate, with TLS
	accessLog string
	*daemon
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
	return startNginxWith(t, directives, false)
}

// startNginxH2 is startNginx serving HTTP/2 (and HTTP/1.1) over TLS, with
// a fresh self-signed certificate for 127.0.0.1.
func startNginxH2(t *testing.T, directives string) *nginx {
	t.Helper()
	return startNginxWith(t, directives, true)
}

func startNginxWith(t *testing.T, directives string, useTLS bool) *nginx {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	addr := testserver.FreePort(t)
	statusAddr := testserver.FreePort(t)
	n := &nginx{
		URL:       "http://" + addr,
		statusURL: "http://" + statusAddr + "/status",
		accessLog: filepath.Join(dir, "access.log"),
	}
	listen := addr
	if useTLS {
		certFile, keyFile, roots := selfSignedFiles(t, dir)
		n.URL = "https://" + addr
		n.tls = &tls.Config{RootCAs: roots}
		listen = fmt.Sprintf("%s ssl http2;\n\t\tssl_certificate %s;\n\t\tssl_certificate_key %s", addr, certFile, keyFile)
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
	server {
		listen %[6]s;
		access_log off;
		location /status { stub_status; }
	}
}
`, user, dir, n.accessLog, directives, listen, statusAddr)
	confPath := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o600))

	// -e: the error log before the configuration is read.
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	n.daemon = startDaemon(t, "nginx", cmd, "getrlimit")
	return n
}

// quit stops nginx gracefully (SIGQUIT: it finishes, and logs, the
// requests of the connections it has), so that its access log is complete;
// it kills it if it has not exited within the guard.
func (n *nginx) quit(t *testing.T) {
	t.Helper()
	n.daemon.quit(t, syscall.SIGQUIT)
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

func probeNginx(t *testing.T, n *nginx, opts ...probe.Option) *probe.Result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.URL+"/", nil)
	require.NoError(t, err)
	all := []probe.Option{probe.Deadline(guard)}
	if n.tls != nil {
		all = append(all, probe.TLSClientConfig(n.tls))
	}
	rep, err := probe.Run(t.Context(), req, append(all, opts...)...)
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

// selfSignedFiles writes a fresh self-signed certificate for 127.0.0.1
// and its key, PEM, into dir, and returns their paths and a pool that
// trusts the certificate.
func selfSignedFiles(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// accepts returns the connections nginx accepted, as its stub_status
// counts them (those that asked for it included).
func (n *nginx) accepts(t *testing.T) int64 {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: guard}).Get(n.statusURL)
	require.NoError(t, err, n.diagnose())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// "server accepts handled requests\n 12 12 40 \n"
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "server accepts") && i+1 < len(lines) {
			f := strings.Fields(lines[i+1])
			require.NotEmpty(t, f, "%q", b)
			a, err := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err)
			return a
		}
	}
	t.Fatalf("no accepts in nginx status: %q", b)
	return 0
}

// requireNginxAccepts checks that nginx accepted the connections the
// probe's main run connected (disc: and its discovery): a dial the
// Transport abandoned may or may not have reached it.
func requireNginxAccepts(t *testing.T, n *nginx, rep *probe.Result, disc int64) {
	t.Helper()
	lo := rep.Dials - rep.DialErrors - rep.DialsAbandoned + disc
	// nginx may accept the last connections a little after the probe
	// ended: ask again until it has (bounded); each asking is one more.
	deadline := time.Now().Add(guard)
	var a int64
	for asked := int64(1); ; asked++ {
		a = n.accepts(t) - asked
		if a >= lo || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, lo <= a && a <= lo+rep.DialsAbandoned,
		"nginx accepted %d, probe dials %d (%d failed, %d abandoned): %+v", a, rep.Dials, rep.DialErrors, rep.DialsAbandoned, rep.Connections)
}

// requests returns the requests nginx logged, and the connections that
// carried them, once it stopped.
func (n *nginx) requests(t *testing.T) (requests int, conns int) {
	t.Helper()
	for _, r := range n.connections(t) {
		requests += r
		conns++
	}
	return requests, conns
}

// TestNginxH2Truth probes nginx over HTTP/2 with keepalive_requests 5, one
// request at a time and eight at once: nginx closes each connection after
// 5 requests with a GOAWAY, and the Transport sends again the streams it
// sent above its last stream id. nginx's log shows each request processed
// once: the report has no possibly processed retry, and the probe's dials
// are nginx's accepts. No handshake failed (nginx, logging at info, logs
// none; no dial failed): no connection is closed as handshake-failed,
// though eight requests at once dial many connections, some twice for one
// request (sent again after a GOAWAY) with both handshakes running, and
// the Transport closes those it does not need as their handshakes end;
// each handshake the Transport abandoned is counted in dials_abandoned; and
// no connection is closed over a request error, none having failed.
func TestNginxH2Truth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []probe.Option
	}{
		{"sequential", []probe.Option{probe.Requests(20)}},
		{"concurrent", []probe.Option{probe.Requests(40), probe.Concurrency(8), probe.MaxConnsPerHost(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := startNginxH2(t, "keepalive_requests 5;\n\terror_log stderr info;")
			rep := probeNginx(t, n, append(tc.opts, probe.Protocols(h2Only()))...)
			require.Equal(t, rep.Requests, rep.Outcomes[vocab.ClassOK], "%+v", rep.Failures)
			require.Zero(t, rep.DialErrors, "%+v", rep.Connections)
			require.NotContains(t, n.diagnose(), "SSL_do_handshake() failed", "nginx saw a handshake fail")
			require.Zero(t, rep.ClosedBy[vocab.ReasonHandshakeFailed], "no handshake failed: %v %+v", rep.ClosedBy, rep.Connections)
			require.LessOrEqual(t, rep.ClosedBy[vocab.ReasonHandshakeAbandon], rep.DialsAbandoned, "%v", rep.ClosedBy)
			// No request failed: no connection closed over one (its
			// protocol known, from its handshake's report, when nginx's
			// GOAWAY closes it with streams still reading).
			require.Zero(t, rep.ClosedBy[vocab.ReasonRequestError], "%v %+v", rep.ClosedBy, rep.Connections)
			require.Equal(t, map[string]int{"h2": len(servedH2(rep))}, rep.Protocols)
			require.Zero(t, rep.HiddenRetriesPossiblyProcessed, "not processed: %v", rep.HiddenRetriesWhy)
			require.NotContains(t, ids(rep), "hidden-retries")
			requireNginxAccepts(t, n, rep, 0)
			n.quit(t)
			requests, conns := n.requests(t)
			require.Equal(t, rep.Requests, requests, "nginx processed each request once")
			require.Equal(t, len(servedH2(rep)), conns, "connections that carried a request")
			t.Logf("%d dials, %d hidden retries (not processed: %v), closes %v",
				rep.Dials, rep.HiddenRetries, rep.HiddenRetriesWhy, rep.ClosedBy)
		})
	}
}

// h2Only is HTTP/2 required, as the command's -http2 asks.
func h2Only() http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	return p
}

// servedH2 returns the report's connections that answered a request.
func servedH2(rep *probe.Result) []probe.Connection {
	var out []probe.Connection
	for _, c := range rep.Connections {
		if c.Responses > 0 {
			out = append(out, c)
		}
	}
	return out
}

// TestNginxHTTP1OverTLSIdleClose: nginx over TLS closes an HTTP/1
// connection idle past its keepalive_timeout with a close_notify, on which
// crypto/tls reports EOF to net/http and reads no further: the FIN goes
// unread, and no read error tells the pool the server closed it. The pool
// reads the alert's record (its type in TLS 1.2, its size in TLS 1.3): the
// close is the server's, server-closed-idle, not the client's
// protocol-error (bytes when no response was due).
func TestNginxHTTP1OverTLSIdleClose(t *testing.T) {
	t.Parallel()
	for name, version := range map[string]uint16{"TLS 1.2": tls.VersionTLS12, "TLS 1.3": tls.VersionTLS13} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := startNginxH2(t, "keepalive_timeout 1s;\n\tssl_protocols TLSv1.2 TLSv1.3;")
			var http1 http.Protocols
			http1.SetHTTP1(true)
			cfg := n.tls.Clone()
			cfg.MinVersion, cfg.MaxVersion = version, version
			// The gap is well past nginx's timeout: the first connection is
			// closed, idle, before the second request.
			rep := probeNginx(t, n, probe.Requests(2), probe.Gap(3*time.Second), probe.Protocols(http1), probe.TLSClientConfig(cfg))
			require.Equal(t, 2, rep.Outcomes[vocab.ClassOK], "%+v", rep.Failures)
			require.Equal(t, map[string]int{name: 2}, rep.TLS.Versions, "%+v", rep.TLS)
			require.Zero(t, rep.ClosedBy[vocab.ReasonProtocolError], "%v %+v", rep.ClosedBy, rep.Connections)
			require.EqualValues(t, 1, rep.ClosedBy[vocab.ReasonServerClosedIdle], "%v %+v", rep.ClosedBy, rep.Connections)
			c := rep.Connections[0]
			require.Equal(t, vocab.ClosedByServer, c.ClosedBy, "%+v", c)
			require.Contains(t, c.CloseDetail, "TLS alert")
		})
	}
}
