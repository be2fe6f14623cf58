package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/proxy"
	"github.com/stretchr/testify/require"
)

// A malformed rule, URL or flag is a clear error at start, exit 2, and
// no secret of the upstream's URL is in it.
func TestProxyUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-upstream URL is required"},
		{[]string{"-upstream", "ftp://x"}, `scheme "ftp" is not http or https`},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:1/?token=T0kenValue"}, "user information"},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:bad/?token=T0kenValue"},
			"upstream http://REDACTED@127.0.0.1:bad/?REDACTED: not a URL: invalid port"},
		{[]string{"-upstream", "http:///us3r:S3cr3tPassw0rd@127.0.0.1/"}, `upstream "http://REDACTED@127.0.0.1/": no host`},
		{[]string{"-upstream", "http://"}, `upstream "http://": no host`},
		{[]string{"-upstream", "http://127.0.0.1:99999"}, "port 99999 is out of range (1 to 65535)"},
		{[]string{"-upstream", "127.0.0.1:0"}, "upstream http://127.0.0.1:0: port 0 is out of range"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "reset nth=zero"}, "nth=N"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "explode"}, "unknown action"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-guard", "-1s"}, "must not be negative"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-faults", "/nonexistent/rules"}, "-faults"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-client-header", "bad header"}, "no header name"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-ca", "x.pem"}, "-ca needs -tls"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-debug", "127.0.0.1:http-alt-nope"}, "-debug: "},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"proxy"}, c.args...), &out, &errb)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errb.String())
		require.Contains(t, errb.String(), c.want)
		for _, s := range []string{"S3cr3tPassw0rd", "T0kenValue", "us3r"} {
			require.NotContains(t, errb.String()+out.String(), s)
		}
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), errb.String())
	}
}

// -duration ends the run with the report: the requests sent through the
// proxy in JSON on stdout, the verdicts in the JUnit file, exit 1 for the
// failed verdict (a connection reused past the stated upstream idle
// timeout of 1ns).
func TestProxyDurationEndsWithReport(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	junitPath := filepath.Join(t.TempDir(), "proxy.xml")
	stderr := &lines{each: make(chan string, 8)}
	var stdout bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"proxy", "-upstream", up.URL, "-duration", "2s",
			"-upstream-idle", "1ns", "-json", "-junit", junitPath}, &stdout, stderr)
	}()
	ctx := testkit.Bounded(t)
	line := stderr.next(t, ctx)    // the proxy started
	fields := strings.Fields(line) // connaudit proxy: URL → upstream (interrupt to stop)
	require.GreaterOrEqual(t, len(fields), 3, line)
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	for range 3 {
		req, err := http.NewRequestWithContext(ctx, "GET", fields[2]+"/x", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	tr.CloseIdleConnections()
	select {
	case got := <-code:
		require.Equal(t, exitFail, got, stderr.String())
	case <-ctx.Done():
		t.Fatal("-duration did not end the run")
	}
	var rep proxy.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	require.Equal(t, "connaudit.proxy/v1", rep.Schema)
	require.Len(t, rep.Clients, 1)
	require.Equal(t, 3, rep.Clients[0].Requests)
	require.Equal(t, 3, rep.Pool.Requests)
	require.True(t, rep.Failed())
	junit, err := os.ReadFile(junitPath)
	require.NoError(t, err)
	require.Contains(t, string(junit), `name="server-idle-timeout"`)
	require.Contains(t, string(junit), "<failure")
}

// lines is a writer that hands over each line written to it.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  bytes.Buffer
	each chan string
}

func (w *lines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(b)
	w.buf.Write(b)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(b), nil
		}
		select {
		case w.each <- strings.TrimSuffix(line, "\n"):
		default: // the test reads the first lines alone
		}
	}
}

func (w *lines) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// next is the next line, or the test fails once ctx is done.
func (w *lines) next(t *testing.T, ctx context.Context) string {
	t.Helper()
	select {
	case l := <-w.each:
		return l
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("no line on stderr: %s", w.all.String())
		return ""
	}
}

// -debug serves the upstream pool's debug page during the run, its
// numbers those of the requests sent; -html draws a set per client with a
// lane per connection the JSON lists, each with its close reason, and one
// of the upstream pool's connections.
func TestProxyDebugAndHTML(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	page := filepath.Join(t.TempDir(), "proxy.html")
	stderr := &lines{each: make(chan string, 8)}
	var stdout bytes.Buffer
	ctx := testkit.Bounded(t)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	code := make(chan int, 1)
	go func() {
		code <- run(runCtx, []string{"proxy", "-upstream", up.URL, "-client-header", "X-Client", "-json",
			"-html", page, "-debug", "127.0.0.1:0"}, &stdout, stderr)
	}()
	fields := strings.Fields(stderr.next(t, ctx)) // connaudit proxy: URL → upstream (interrupt to stop)
	require.GreaterOrEqual(t, len(fields), 3)
	proxyURL := fields[2]
	debugLine := stderr.next(t, ctx)
	debugURL := debugLine[strings.LastIndex(debugLine, " ")+1:]
	require.True(t, strings.HasPrefix(debugURL, "http://127.0.0.1:"), debugLine)

	get := func(c *http.Client, url string, header ...string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	keep := &http.Transport{}
	for range 3 { // one connection, kept
		resp := get(&http.Client{Transport: keep}, proxyURL+"/a", "X-Client", "keeper")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	closer := &http.Transport{DisableKeepAlives: true}
	for range 2 { // a connection each, "Connection: close"
		resp := get(&http.Client{Transport: closer}, proxyURL+"/b", "X-Client", "closer")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	keep.CloseIdleConnections()

	dtr := &http.Transport{}
	t.Cleanup(dtr.CloseIdleConnections)
	dc := &http.Client{Transport: dtr}
	resp := get(dc, debugURL)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var snap struct {
		Total struct {
			Requests int64 `json:"requests"`
		} `json:"total"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	require.EqualValues(t, 5, snap.Total.Requests)
	resp = get(dc, debugURL+"?format=text")
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	resp = get(dc, debugURL+"?format=html")
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")

	stop()
	select {
	case got := <-code:
		require.Equal(t, exitOK, got, stderr.String())
	case <-ctx.Done():
		t.Fatal("the run did not end at the interrupt")
	}
	var rep proxy.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	sets := strings.Split(string(b), `<section class="set"`)[1:]
	require.Len(t, sets, len(rep.Clients)+1, "a set per client, and the upstream pool's")
	require.Len(t, rep.Clients, 2)
	for i, c := range rep.Clients {
		want := map[string]string{}
		for _, cn := range c.List {
			want[jsonID(cn.ID)] = cn.Reason
		}
		require.Len(t, want, c.Conns)
		require.Equal(t, c.Conns, strings.Count(sets[i], `<g class="lane`), c.Name)
		require.Equal(t, want, laneReasons(sets[i]), c.Name)
	}
	require.Equal(t, map[string]int{"client: connection-close": 2}, rep.Clients[1].Closes)
	want := map[string]string{}
	for _, c := range rep.Pool.List {
		want[jsonID(c.ID)] = c.Reason
	}
	require.Equal(t, want, laneReasons(sets[len(sets)-1]))

	_, err = dc.Get(debugURL)
	require.Error(t, err, "the debug page ends with the run")
}

// laneReasons maps each lane of a page's set to the close reason it
// shows ("" for a lane with none).
func laneReasons(set string) map[string]string {
	got := map[string]string{}
	for _, m := range laneRE.FindAllStringSubmatch(set, -1) {
		got[m[1]] = ""
	}
	for _, m := range reasonRE.FindAllStringSubmatch(set, -1) {
		got[m[1]] = m[2]
	}
	return got
}

// -debug listens on loopback unless its address names a host.
func TestProxyDebugLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0"} {
		ln, err := listenLoopback(addr)
		require.NoError(t, err, addr)
		require.Contains(t, ln.Addr().String(), "127.0.0.1:", addr)
		ln.Close()
	}
}

// An upstream's URL without a scheme is an http one, as probe and trace
// take it: the proxy forwards to it.
func TestProxyUpstreamWithoutScheme(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	stderr := &lines{each: make(chan string, 8)}
	var stdout bytes.Buffer
	ctx, cancel := context.WithCancel(testkit.Bounded(t))
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"proxy", "-upstream", up.Listener.Addr().String()}, &stdout, stderr)
	}()
	line := stderr.next(t, ctx)    // the proxy started
	fields := strings.Fields(line) // connaudit proxy: URL → upstream (interrupt to stop)
	require.GreaterOrEqual(t, len(fields), 5, line)
	require.Equal(t, "http://"+up.Listener.Addr().String(), fields[4], line)
	tr := &http.Transport{}
	req, err := http.NewRequestWithContext(ctx, "GET", fields[2]+"/x", nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tr.CloseIdleConnections()
	cancel()
	select {
	case got := <-code:
		require.Equal(t, exitOK, got, stderr.String())
	case <-testkit.Bounded(t).Done():
		t.Fatal("the run did not end")
	}
	require.Contains(t, stdout.String(), "1 request", stdout.String())
}
