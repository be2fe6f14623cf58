package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the exporter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestService runs the service, calls /work, and finds the pool's numbers
// on /metrics and the request's stages in the spans written out.
func TestService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, &out) }()

	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(path string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %s", path, err, resp.Status)
		}
		return string(b)
	}
	for range 3 {
		if got := get("/work"); got != "ok\n" {
			t.Fatalf("/work: %q", got)
		}
	}
	metrics := get("/metrics")
	for _, want := range []string{
		`connaudit_pool_requests_total{pool="upstream"} 3`,
		`connaudit_pool_idle_connections{pool="upstream"} 1`,
		`http_client_open_connections{http_connection_state="idle"`,
		`http_client_request_duration_seconds_count{http_request_method="GET"`,
		`http_client_request_time_in_queue_seconds_count{`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	spans := out.String()
	for _, want := range []string{`"Name":"HTTP wait_for_connection 127.0.0.1:`, `"Name":"HTTP wait_for_response"`, `"Name":"HTTP read_response_body"`, `"Name":"HTTP GET"`} {
		if !strings.Contains(spans, want) {
			t.Errorf("spans lack %s", want)
		}
	}
}
