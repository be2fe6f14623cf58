package httptrace_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connaudit/connaudit/httptrace"
)

// BenchmarkRoundTrip measures the steady state of a service: sequential GETs
// on one keep-alive connection to an in-process server, each body read to
// EOF and closed. "plain" is the bare *http.Transport, "traced" the same
// wrapped in a Transport with a no-op observer; the difference is the
// tracer's cost per request. Read it with benchstat.
func BenchmarkRoundTrip(b *testing.B) {
	payload := []byte("hello, connaudit\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(payload)
	}))
	defer srv.Close()

	run := func(b *testing.B, rt http.RoundTripper) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		do := func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
		do() // dial the connection outside the measurement
		b.ReportAllocs()
		for b.Loop() {
			do()
		}
	}

	b.Run("plain", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		run(b, base)
	})
	b.Run("traced", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		tr, err := httptrace.NewTransport(base, httptrace.WithObserver(httptrace.ObserverFunc(func(*httptrace.Timeline) {})))
		if err != nil {
			b.Fatal(err)
		}
		run(b, tr)
	})
	// DNS and connect hooks attached inside the dialer (as the pool does):
	// net/http then builds no nettrace per request.
	b.Run("traced-dialhooks", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		tr, err := httptrace.NewTransport(base, httptrace.WithObserver(httptrace.ObserverFunc(func(*httptrace.Timeline) {})))
		if err != nil {
			b.Fatal(err)
		}
		withDialerHooks(base, tr)
		run(b, tr)
	})
}
