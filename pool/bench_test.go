package pool_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connaudit/connaudit/pool"
)

// BenchmarkRoundTrip measures the steady state of a service — sequential
// GETs on one kept-alive connection to an in-process server — through a
// bare transport, the pool's tracked transport without the tracer, and the
// pool's client (tracer and tracking). Read with benchstat; the difference
// from "plain" is the cost of auditing.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(okHandler)
	defer srv.Close()

	// Each goes through an http.Client, as a service's requests do.
	run := func(b *testing.B, c *http.Client) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		do := func() {
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
		do() // dial outside the measurement
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			do()
		}
	}

	b.Run("plain", func(b *testing.B) {
		tr := &http.Transport{MaxConnsPerHost: 1}
		defer tr.CloseIdleConnections()
		run(b, &http.Client{Transport: tr})
	})
	b.Run("tracked", func(b *testing.B) {
		p, err := pool.New(pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		run(b, &http.Client{Transport: p.Transport()})
	})
	b.Run("traced+tracked", func(b *testing.B) {
		p, err := pool.New(pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		run(b, p.Client())
		if s := p.Stats(); s.Dials != 1 {
			b.Fatalf("dials %d, want 1", s.Dials)
		}
	})
}
