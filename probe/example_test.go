package probe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/connaudit/connaudit/probe"
)

// A server that keeps connections alive serves every request on one
// connection: one dial, as with perfect keep-alive, and nothing to report.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/health", nil)
	if err != nil {
		panic(err)
	}
	rep, err := probe.Run(context.Background(), req, probe.Requests(10))
	if err != nil {
		fmt.Println("probe:", err)
		return
	}
	fmt.Printf("%d requests, %d dial(s), %d with perfect keep-alive\n", rep.Requests, rep.Dials, rep.PerfectDials)
	fmt.Println("outcomes:", rep.Outcomes, "statuses:", rep.Statuses)
	fmt.Println("findings:", len(rep.Findings))
	// Output:
	// 10 requests, 1 dial(s), 1 with perfect keep-alive
	// outcomes: map[ok:10] statuses: map[200:10]
	// findings: 0
}

// A server that closes every connection after its response costs a dial
// per request: the report says so in a finding, and Fails gates on its
// severity.
func ExampleResult_Has() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		panic(err)
	}
	rep, err := probe.Run(context.Background(), req, probe.Requests(4))
	if err != nil {
		fmt.Println("probe:", err)
		return
	}
	if f, ok := rep.Has("no-keep-alive"); ok {
		fmt.Printf("%s %s: %s\n", f.Severity, f.ID, f.Message)
	}
	fmt.Println("fails at warn:", rep.Fails("warn"), "at error:", rep.Fails("error"))
	// Output:
	// warn no-keep-alive: the server closed every connection after one response (Connection: close): 4 dials for 4 requests; with keep-alive 1 would do
	// fails at warn: true at error: false
}

// Protocols chooses what the probe's client may speak. Against a server
// that offers HTTP/2 over TLS, the probe speaks HTTP/2 unless told to
// keep to HTTP/1.
func ExampleProtocols() {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	trust := probe.TLSClientConfig(&tls.Config{RootCAs: roots})

	var http1 http.Protocols
	http1.SetHTTP1(true)
	for _, opts := range [][]probe.Option{
		{trust},
		{trust, probe.Protocols(http1)},
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			panic(err)
		}
		rep, err := probe.Run(context.Background(), req, append(opts, probe.Requests(3))...)
		if err != nil {
			fmt.Println("probe:", err)
			return
		}
		fmt.Println(rep.Protocols, "ALPN", rep.TLS.ALPN, "dials", rep.Dials)
	}
	// Output:
	// map[h2:1] ALPN h2 dials 1
	// map[HTTP/1.1:1] ALPN http/1.1 dials 1
}

// WriteJSON writes the report in its documented form, schema
// "connaudit.probe/v1".
func ExampleResult_WriteJSON() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/?token=secret", nil)
	if err != nil {
		panic(err)
	}
	rep, err := probe.Run(context.Background(), req, probe.Requests(3))
	if err != nil {
		fmt.Println("probe:", err)
		return
	}
	var b strings.Builder
	if err := rep.WriteJSON(&b); err != nil {
		panic(err)
	}
	var doc struct {
		Schema      string `json:"schema"`
		Target      string `json:"target"`
		Requests    int    `json:"requests"`
		Connections []struct {
			Responses int    `json:"responses"`
			ClosedBy  string `json:"closed_by"`
			Reason    string `json:"close_reason"`
		} `json:"connections"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		panic(err)
	}
	fmt.Println(doc.Schema, doc.Requests, strings.TrimPrefix(doc.Target, srv.URL))
	for _, c := range doc.Connections {
		fmt.Printf("%d responses, closed by the %s: %s\n", c.Responses, c.ClosedBy, c.Reason)
	}
	// Output:
	// connaudit.probe/v1 3 /?token=REDACTED
	// 3 responses, closed by the client: close-idle-connections
}

// OnProgress hands over each main-run timeline as its request ends, so that
// a long run can write them as they come (a waterfall, a JSON line) instead
// of keeping them all.
func ExampleOnProgress() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		panic(err)
	}
	timelines := 0
	rep, err := probe.Run(context.Background(), req, probe.Requests(5),
		probe.OnProgress(func(p probe.Progress) {
			if p.Timeline != nil {
				timelines++ // valid during the call: write it out, or keep a Clone
			}
		}))
	if err != nil {
		fmt.Println("probe:", err)
		return
	}
	fmt.Println(timelines, "timelines seen,", len(rep.Timelines), "kept")
	// Output:
	// 5 timelines seen, 0 kept
}
