package benchpair

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
)

// URLEnv names the environment variable that points a benchmark at a
// server in another process (bench/cmd/okserver prints its URL), so that
// allocations are the client's alone. It must be a loopback http URL.
const URLEnv = "CONNAUDIT_BENCH_URL"

var errNotLoopback = errors.New("want an http URL on a loopback address")

// CheckLoopback returns an error unless raw is an http URL whose host is a
// loopback address or "localhost": benchmarks send traffic nowhere else.
func CheckLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return fmt.Errorf("URL %q: %w", raw, errNotLoopback)
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("URL %q: %w", raw, errNotLoopback)
		}
	}
	return nil
}

// Target returns the URL a benchmark sends its requests to: the one in
// [URLEnv], which must pass [CheckLoopback] (else b fails), or that of an
// in-process server answering "ok", closed when b ends.
func Target(b testing.TB) string {
	if target := os.Getenv(URLEnv); target != "" {
		if err := CheckLoopback(target); err != nil {
			b.Fatalf("%s: %v", URLEnv, err)
		}
		return target
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	b.Cleanup(srv.Close)
	return srv.URL + "/ok"
}
