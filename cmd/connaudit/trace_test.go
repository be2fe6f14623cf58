package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTraceWaterfallAndJSON(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://alice:pa55word@", 1) + "/x?token=t0ken"

	code, out, errOut := runCLI(t, "trace", "-H", "Authorization: Bearer b3arer", "-H", "Cookie: c00kie=1", u)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "response    200 HTTP/1.1")
	require.Contains(t, out, "token=REDACTED")
	require.Equal(t, "Bearer b3arer", gotAuth, "the header was sent")

	code, js, errOut := runCLI(t, "trace", "-json", "-H", "Authorization: Bearer b3arer", u)
	require.Equal(t, exitOK, code, errOut)
	var tl map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &tl))
	require.Equal(t, "ok", tl["outcome"].(map[string]any)["class"])

	for _, s := range []string{out, js, errOut} {
		for _, secret := range []string{"pa55word", "t0ken", "b3arer", "c00kie", "alice"} {
			require.NotContains(t, s, secret)
		}
	}
}

func TestTraceFailureExitsOne(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there now
	code, out, _ := runCLI(t, "trace", "http://"+addr+"/")
	require.Equal(t, exitFail, code)
	require.Contains(t, out, "connect-refused")
}

func TestTraceUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"trace"},
		{"trace", "ht tp://x"},
		{"trace", "ftp://127.0.0.1/"},
		{"trace", "127.0.0.1:80"},
		{"trace", "http://:80/"},
		{"trace", "http://127.0.0.1:99999/"},
		{"trace", "-H", "no colon", "http://127.0.0.1/"},
		{"trace", "-X", "BAD METHOD", "http://127.0.0.1/"},
		{"trace", "-timeout", "-1s", "http://127.0.0.1/"},
		{"trace", "-http1", "-http2", "https://127.0.0.1/"},
		{"trace", "-http2", "http://127.0.0.1/"},
		{"trace", "-d", "@/no/such/file", "http://127.0.0.1/"},
		{"trace", "http://u:secretpw@127.0.0.1:99999/"},
		{"trace", "-deadline", "-1s", "http://127.0.0.1/"},
	} {
		code, _, errOut := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%q: %s", args, errOut)
		require.NotEmpty(t, errOut)
		require.NotContains(t, errOut, "secretpw")
		require.NotContains(t, errOut, "goroutine ")
	}
}
