package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/pool"
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

// service is fleetview running for a test.
type service struct {
	base   string
	pool   *pool.Pool
	client *http.Client
	ctx    context.Context
	stop   func() error
}

// start runs fleetview on loopback with cfg, spans to out, until stop.
func start(t *testing.T, cfg config, out io.Writer) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	pools := make(chan *pool.Pool, 1)
	cfg.onPool = func(p *pool.Pool) { pools <- p }
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, out, cfg) }()
	s := &service{base: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}}, ctx: ctx}
	select {
	case s.pool = <-pools:
	case err := <-done:
		cancel()
		t.Fatalf("fleetview: %v", err)
	}
	var once sync.Once
	var err2 error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			err2 = <-done
			s.client.CloseIdleConnections()
		})
		return err2
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *service) get(t *testing.T, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Do(req)
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

// TestService runs the service, calls /work, and finds the pool's numbers
// on /metrics once each, by one exporter, with service.name set; the pool
// on /debug/connpool; and the request's stages in the spans written out.
func TestService(t *testing.T) {
	var out syncBuffer
	s := start(t, config{concurrency: 1, spans: true}, &out)
	for range 3 {
		if got := s.get(t, "/work"); got != "ok\n" {
			t.Fatalf("/work: %q", got)
		}
	}
	metrics := s.get(t, "/metrics")
	for _, want := range []string{
		`connaudit_pool_requests_total{pool="upstream",server_address="127.0.0.1",server_port="`,
		`connaudit_pool_idle_connections{pool="upstream",server_address="127.0.0.1"`,
		`connaudit_pool_wait_duration_seconds_bucket{pool="upstream",server_address="127.0.0.1",server_port="`,
		`http_client_request_duration_seconds_count{http_request_method="GET"`,
		`service_name="fleetview"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	// One exporter's names per concept: what promconnaudit exports is
	// not exported again by the OpenTelemetry side.
	for _, dup := range []string{"http_client_open_connections", "http_client_active_requests", "connaudit_response_open_bodies",
		"connaudit_connection_closes", "http_client_request_time_in_queue", "connaudit_request_hidden_retries", "connaudit_connection_setup"} {
		if strings.Contains(metrics, dup) {
			t.Errorf("/metrics exports %s beside promconnaudit's", dup)
		}
	}
	var snap pool.Snapshot
	if err := json.Unmarshal([]byte(s.get(t, "/debug/connpool")), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Total.Requests != 3 || len(snap.Hosts) != 1 {
		t.Errorf("/debug/connpool: %d requests to %d hosts, want 3 to 1", snap.Total.Requests, len(snap.Hosts))
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	spans := out.String()
	for _, want := range []string{`"Name":"HTTP wait_for_connection 127.0.0.1:`, `"Name":"HTTP wait_for_response"`, `"Name":"HTTP read_response_body"`, `"Name":"HTTP GET"`} {
		if !strings.Contains(spans, want) {
			t.Errorf("spans lack %s", want)
		}
	}
}

// TestLoad: -load drives requests to both upstreams through the pool, and
// -faults makes hidden retries the server may have processed and bodies
// left open, all of which the service closes when it stops.
func TestLoad(t *testing.T) {
	s := start(t, config{load: 400, concurrency: 8, faults: true}, io.Discard)
	err := s.pool.WaitFor(s.ctx, func(st pool.Stats) bool {
		return st.Requests >= 300 && st.HiddenRetriesPossiblyProcessed >= 1 && st.OpenBodies >= 1
	})
	if err != nil {
		t.Fatal(err)
	}
	hosts := s.pool.HostStats()
	if len(hosts) != 2 {
		t.Fatalf("%d hosts, want the two upstreams: %v", len(hosts), hosts)
	}
	for h, st := range hosts {
		if st.Requests < 100 {
			t.Errorf("%s: %d requests", h, st.Requests)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.Quiesce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := s.pool.Stats(); st.OpenBodies != 0 || st.InFlight != 0 {
		t.Errorf("after the service stopped: %d bodies open, %d requests in flight", st.OpenBodies, st.InFlight)
	}
}

func TestConfigRejects(t *testing.T) {
	for _, c := range []config{{load: -1, concurrency: 1}, {concurrency: 0}, {concurrency: 1, maxIdle: -1}} {
		if err := c.check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
