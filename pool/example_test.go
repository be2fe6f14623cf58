package pool_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
)

// ExampleNew builds a service's pool: http.DefaultTransport's settings on
// a fresh transport, each request's stages logged through log/slog, and
// the pool's statistics at hand.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	logger := slog.New(slog.NewTextHandler(io.Discard, nil)) // your service's logger
	p, err := pool.New(pool.WithObserver(httptrace.NewSlogObserver(logger, slog.LevelDebug, slog.LevelWarn)))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	client := p.Client()

	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s := p.Stats()
	fmt.Printf("requests %d, dials %d, reused %d, open %d\n", s.Requests, s.Dials, s.ReusedRequests, s.Open)
	// Output:
	// requests 3, dials 1, reused 2, open 1
}

// ExampleTrack tracks a transport of your own as it is configured: its
// caps and timeouts stay yours, and the transport itself is not changed.
func ExampleTrack() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	yours := &http.Transport{MaxConnsPerHost: 8, ResponseHeaderTimeout: 5 * time.Second}
	p, err := pool.Track(yours)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	resp, err := p.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The Transport closes the connection in the background.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.WaitFor(ctx, func(s pool.Stats) bool { return s.Closed == 1 }); err != nil {
		panic(err)
	}
	for _, c := range p.Conns() {
		fmt.Printf("#%d %s, closed by %s: %s\n", c.ID, c.State, c.ClosedBy, c.CloseReason)
	}
	fmt.Println(p.Transport().MaxConnsPerHost, p.Transport().ResponseHeaderTimeout)
	// Output:
	// #1 closed, closed by server: connection-close
	// 8 5s
}

// ExamplePool_Handler serves the pool's state on a debug route: JSON, or
// text tables with ?format=text. A body left open shows there, with when
// it was opened (and, with CaptureStacks, where).
func ExamplePool_Handler() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p, err := pool.New()
	if err != nil {
		panic(err)
	}
	defer p.Close()

	mux := http.NewServeMux()
	mux.Handle("/debug/connpool", p.Handler())

	resp, err := p.Client().Get(srv.URL + "/left-open")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close() // closed only at the end: open while the page is read

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connpool?format=text", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "OPEN BODY") {
			fmt.Print(strings.Join(strings.Fields(line), " "), "\n")
		}
	}
	fmt.Println(p.Stats().OpenBodies, "open body")
	// Output:
	// OPEN BODY METHOD URL CONN OPENED AT AGE SITE
	// 1 open body
}

// ExampleOnConnClose: each connection's end reaches a hook, with who closed it and why: here
// the server, whose response said "Connection: close".
func ExampleOnConnClose() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	closed := make(chan pool.Conn, 1)
	p, err := pool.New(pool.OnConnClose(func(c pool.Conn) { closed <- c }))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	resp, err := p.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	c := <-closed
	fmt.Println(c.ClosedBy, c.CloseReason, c.Proto)
	// Output: server connection-close HTTP/1.1
}

// ExampleOnConnOpen: each connection reaches a hook once established, with
// when its dial started, which is how an exporter records its setup; the
// pool counts the same in Stats.Setups, by bucket.
func ExampleOnConnOpen() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	opened := make(chan pool.Conn, 1)
	p, err := pool.New(pool.OnConnOpen(func(c pool.Conn) { opened <- c }))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	resp, err := p.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	c := <-opened
	established := c.History[len(c.History)-1]
	fmt.Println(c.Scheme, c.Proto, established.State, !established.At.Before(c.DialedAt))
	s := p.Stats()
	fmt.Println(s.Setups.Count, "setup,", s.Waits.Count, "wait, in", len(s.Waits.Buckets), "buckets:", len(pool.DurationBuckets()), "bounds and one past the last")
	// Output:
	// http HTTP/1.1 idle true
	// 1 setup, 1 wait, in 19 buckets: 18 bounds and one past the last
}

// The bounds of the buckets in which the pool counts waits and setups.
func ExampleDurationBuckets() {
	fmt.Println(pool.DurationBuckets())
	// Output: [25µs 50µs 100µs 250µs 500µs 1ms 2.5ms 5ms 10ms 25ms 50ms 100ms 250ms 500ms 1s 2.5s 5s 10s]
}
