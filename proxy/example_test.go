package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/proxy"
)

// A rule is read from its text; a malformed one is an error that says
// what is wrong.
func ExampleParseRule() {
	r, err := proxy.ParseRule("reset   nth=2 method=POST")
	fmt.Println(r, err)
	_, err = proxy.ParseRule("reset nth=0")
	fmt.Println(err)
	// Output:
	// reset nth=2 method=POST <nil>
	// proxy: fault "reset nth=0": nth=N needs a request index from 1, not "0"
}

// Rules from a file: one a line, blank lines and comments skipped; an
// error names its line.
func ExampleParseRules() {
	rules, err := proxy.ParseRules(strings.NewReader("# the first reuse of each connection\nreset nth=2\n\nstatus=503 times=2\n"))
	fmt.Println(len(rules), rules, err)
	_, err = proxy.ParseRules(strings.NewReader("reset\nexplode\n"))
	fmt.Println(err)
	// Output:
	// 2 [reset nth=2 status=503 times=2] <nil>
	// line 2: proxy: fault "explode": unknown action "explode" (reset, close, status=CODE, delay-headers=D, stall-body=N, goaway, idle-close=T, go-dark=T)
}

// The client under test is pointed at the proxy; once the proxy is
// closed, its report is final: each client's connections and requests,
// the upstream pool's, and the verdicts.
func ExampleProxy() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	p, err := proxy.New(upstream.URL, proxy.ClientHeader("X-Client"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(); err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{}
	for range 3 {
		req, _ := http.NewRequest("GET", p.URL()+"/items", nil)
		req.Header.Set("X-Client", "checkout")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	tr.CloseIdleConnections()
	p.Close()
	rep := p.Report()
	for _, c := range rep.Clients {
		fmt.Printf("%s: %d conn, %d requests, %d reused\n", c.Name, c.Conns, c.Requests, c.Reused)
	}
	fmt.Printf("upstream pool: %d conn, %d requests\n", rep.Pool.Conns, rep.Pool.Requests)
	for _, v := range rep.Verdicts {
		fmt.Println(v.Name, v.Result)
	}
	// Output:
	// checkout: 1 conn, 3 requests, 2 reused
	// upstream pool: 1 conn, 3 requests
	// write-committed-twice pass
	// hidden-retry pass
	// unbounded skipped
	// server-idle-timeout skipped
}

// A POST the upstream processed, its response dropped by a fault, sent
// again by the caller: a write committed twice, which fails the run.
func ExampleFaults() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "created")
	}))
	defer upstream.Close()
	rule, _ := proxy.ParseRule("close at=after-upstream method=POST times=1")
	p, err := proxy.New(upstream.URL, proxy.Faults(rule))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(); err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{}
	for try := 1; try <= 2; try++ { // the caller's retry
		resp, err := (&http.Client{Transport: tr}).Post(p.URL()+"/orders", "application/json", strings.NewReader(`{"item":1}`))
		if err != nil {
			fmt.Println("try", try, "failed")
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println("try", try, resp.Status)
		break
	}
	tr.CloseIdleConnections()
	p.Close()
	rep := p.Report()
	for _, v := range rep.Verdicts {
		if v.Name == "write-committed-twice" {
			fmt.Println(v.Result+":", v.Detail)
		}
	}
	fmt.Println("failed:", rep.Failed())
	// Output:
	// try 1 failed
	// try 2 200 OK
	// fail: 1 write committed twice upstream, as POST /orders: sent again on connection #2 after fault close-after-upstream on #1
	// failed: true
}

// The proxy's upstream pool, for a program that embeds the proxy: its
// numbers for an exporter (promconnaudit.NewCollector takes it), its
// debug page (pool's Handler) on a route of the program's own, and, given
// at New, options of the pool's such as an observer or connection hooks.
func ExampleProxy_UpstreamPool() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	var closed atomic.Int64
	p, err := proxy.New(upstream.URL, proxy.UpstreamPoolOptions(pool.OnConnClose(func(pool.Conn) { closed.Add(1) })))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(); err != nil {
		fmt.Println(err)
		return
	}
	debug := httptest.NewServer(p.UpstreamPool().Handler()) // mounted on /debug/connpool, say
	defer debug.Close()
	tr := &http.Transport{}
	for range 3 {
		resp, err := (&http.Client{Transport: tr}).Get(p.URL() + "/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	tr.CloseIdleConnections()
	s := p.UpstreamPool().Stats()
	fmt.Printf("upstream pool: %d requests, %d dial\n", s.Requests, s.Dials)
	resp, err := http.Get(debug.URL + "?format=text")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("debug page:", resp.Header.Get("Content-Type"))
	p.Close()
	fmt.Println("upstream connections closed:", closed.Load())
	// Output:
	// upstream pool: 3 requests, 1 dial
	// debug page: text/plain; charset=utf-8
	// upstream connections closed: 1
}
