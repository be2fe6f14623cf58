package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/connaudit/connaudit/proxy"
)

// benchUpstream answers "ok" to every request, as bench/proxy.sh's nginx.
func benchUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	b.Cleanup(up.Close)
	return up
}

// benchGets sends GETs to url from parallel keep-alive clients.
func benchGets(b *testing.B, url string) {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkProxyGet is the proxy's hot path: a GET through it to a
// loopback upstream, no rule.
func BenchmarkProxyGet(b *testing.B) {
	up := benchUpstream(b)
	p, err := proxy.New(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	benchGets(b, p.URL()+"/x?q=1")
}

// BenchmarkProxyFloor is the floor the proxy is measured against: a bare
// httputil.ReverseProxy with a tuned transport, on one http.Server.
func BenchmarkProxyFloor(b *testing.B) {
	up := benchUpstream(b)
	u, _ := url.Parse(up.URL)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, Transport: tr}
	srv := httptest.NewServer(rp)
	b.Cleanup(srv.Close)
	benchGets(b, srv.URL+"/x?q=1")
}
