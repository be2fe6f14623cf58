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
		{[]string{"-upstream", "ftp://x"}, "an http or https URL"},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:1/?token=T0kenValue"}, "user information"},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:bad/?token=T0kenValue"}, "not a URL"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "reset nth=zero"}, "nth=N"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "explode"}, "unknown action"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-guard", "-1s"}, "must not be negative"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-faults", "/nonexistent/rules"}, "-faults"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-client-header", "bad header"}, "no header name"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-ca", "x.pem"}, "-ca needs -tls"},
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

// firstLine is a writer that hands over the first line written to it.
type firstLine struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan string
}

func (w *firstLine) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := bytes.IndexByte(w.buf.Bytes(), '\n') >= 0
	w.buf.Write(b)
	if line, _, ok := strings.Cut(w.buf.String(), "\n"); ok && !had {
		w.first <- line
	}
	return len(b), nil
}

func (w *firstLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
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
	stderr := &firstLine{first: make(chan string, 1)}
	var stdout bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"proxy", "-upstream", up.URL, "-duration", "2s",
			"-upstream-idle", "1ns", "-json", "-junit", junitPath}, &stdout, stderr)
	}()
	ctx := testkit.Bounded(t)
	var line string
	select {
	case line = <-stderr.first:
	case <-ctx.Done():
		t.Fatal("the proxy did not start")
	}
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
