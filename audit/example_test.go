package audit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/retry"
)

// Example runs part of the catalogue against the reference pool and prints
// each scenario's verdict. In a test, fail on !rep.OK() and write the
// report with rep.WriteText(&b, false) into the failure message.
func Example() {
	scenarios, err := audit.Select(audit.Catalogue(), `^(ok|status-503|close-before-response)$`, "")
	if err != nil {
		panic(err)
	}
	r, err := audit.NewRunner()
	if err != nil {
		panic(err)
	}
	rep := r.Run(context.Background(), scenarios)
	for _, res := range rep.Results {
		fmt.Printf("%-22s %-14s pass=%t\n", res.Name, res.Observed.Class, res.Pass)
	}
	fmt.Println("ok:", rep.OK())
	// Output:
	// ok                     ok             pass=true
	// status-503             ok             pass=true
	// close-before-response  server-closed  pass=true
	// ok: true
}

// ExampleWithTransport audits a transport of your own instead of the
// reference pool: its own bounds decide. This one has no
// ResponseHeaderTimeout, so nothing it has ends the wait for a server that
// never answers: the scenario's guard does, and the scenario fails as
// unbounded, with the setting that bounds the stage.
func ExampleWithTransport() {
	yours := func() *http.Transport { return &http.Transport{} }
	r, err := audit.NewRunner(audit.WithTransport("ours", yours))
	if err != nil {
		panic(err)
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^response-header-timeout$`, "")
	res := r.Run(context.Background(), scenarios).Results[0]
	fmt.Println(res.Pass, res.Observed.Unbounded, res.Observed.UnboundedStage)
	fmt.Println(res.Mismatches[0])
	fmt.Println("fix:", res.Fix)
	// Output:
	// false true await-headers
	// unbounded: no timeout fired at stage await-headers within the scenario's guard (2s, three times its wait and a second, at least 2s; the guard deadline, 10s, waits only for a bound the audit cannot see)
	// fix: set ResponseHeaderTimeout: it bounds the wait for the response headers
}

// withHeader is a service's own RoundTripper: it adds a header, then sends
// the request through next. Its Unwrap method lets the audit see next.
type withHeader struct{ next http.RoundTripper }

func (w withHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Service", "orders")
	return w.next.RoundTrip(req)
}

func (w withHeader) Unwrap() http.RoundTripper { return w.next }

// ExampleWithRoundTripper audits a service's RoundTripper chain as it
// sends requests: through its own wrapper, whose Unwrap method shows the
// audit the *http.Transport inside, tracked with its connections and
// bounds. Without Unwrap the audit would see neither, and would say so.
func ExampleWithRoundTripper() {
	yours := func() http.RoundTripper {
		return withHeader{next: &http.Transport{ResponseHeaderTimeout: time.Second}}
	}
	r, err := audit.NewRunner(audit.WithRoundTripper("orders", yours))
	if err != nil {
		panic(err)
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^ok$`, "")
	res := r.Run(context.Background(), scenarios).Results[0]
	fmt.Println(res.Pass, res.Observed.Dials)
	fmt.Println(res.Observed.Notes[0])
	// Output:
	// true 1
	// sees: the *http.Transport inside audit_test.withHeader → *http.Transport (by Unwrap): its bounds and connections
}

// ExampleProtocols declares the protocols a client is meant to speak. This
// transport dials with a net.Dialer of its own, which turns net/http's
// automatic HTTP/2 off: with HTTP/1 and HTTP/2 meant, that is one finding,
// with its fix, and the HTTP/2 scenarios are skipped rather than failed one
// by one. Declared HTTP/1 only, the same transport passes.
func ExampleProtocols() {
	yours := func() *http.Transport {
		return &http.Transport{DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^(h2/)?ok$`, "")
	var both http.Protocols
	both.SetHTTP1(true)
	both.SetHTTP2(true)
	r, err := audit.NewRunner(audit.WithTransport("ours", yours), audit.Protocols(both))
	if err != nil {
		panic(err)
	}
	rep := r.Run(context.Background(), scenarios)
	fmt.Println(rep.OK(), rep.Passed, rep.Skipped)
	fmt.Println(rep.Findings[0])

	var h1 http.Protocols
	h1.SetHTTP1(true)
	r, _ = audit.NewRunner(audit.WithTransport("ours", yours), audit.Protocols(h1))
	rep = r.Run(context.Background(), scenarios)
	fmt.Println(rep.OK(), rep.Passed, rep.Skipped, rep.Results[1].Skipped)
	// Output:
	// false 1 1
	// HTTP/2 is meant, but the transport cannot speak it: it has its own DialContext and ForceAttemptHTTP2 is false, so net/http does not attempt HTTP/2; fix: set ForceAttemptHTTP2: true (or Protocols with HTTP2)
	// true 1 1 HTTP/2 is not meant (audit.Protocols: HTTP/1 only)
}

// ExampleWithRetry audits a retry layer of your own on the retry
// contracts. This one retries every 5xx, so the contract that a 500 is not
// retried (A5) fails, and its verdict says what was seen.
func ExampleWithRetry() {
	greedy := func(p retry.Policy) (audit.RetryFunc, error) {
		return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
			for i := 0; ; i++ {
				resp, err := c.Do(req.WithContext(ctx))
				if err != nil || resp.StatusCode < 500 || i == p.MaxRetries {
					return resp, err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				time.Sleep(p.Delay)
			}
		}, nil
	}
	r, err := audit.NewRunner(audit.WithRetry("greedy", greedy))
	if err != nil {
		panic(err)
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^retry/(503-503-ok|500)$`, "")
	for _, res := range r.Run(context.Background(), scenarios).Results {
		fmt.Println(res.Contract, res.Pass, res.Mismatches)
	}
	// Output:
	// A2 true []
	// A5 false [A5: client attempts: expected 1, observed 3 A5: 500 was retried: 3 requests, contract 1]
}

// retrier is a retry layer as services write it: a RoundTripper that
// retries a GET on a 503 a fixed number of times, whatever a policy says.
type retrier struct {
	next    http.RoundTripper
	retries int
}

func (r *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == r.retries {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// ExampleWithRetryTransport audits a retry layer written as an
// http.RoundTripper over the audited pool. This one retries 3 times
// whatever the policy says, so the contract that a 503 is retried at most
// MaxRetries times (A3) fails, naming the policy field it does not apply.
func ExampleWithRetryTransport() {
	layer := func(base http.RoundTripper, p retry.Policy) (http.RoundTripper, error) {
		return &retrier{next: base, retries: 3}, nil // ignores p.MaxRetries
	}
	r, err := audit.NewRunner(audit.WithRetryTransport("fixed: 3 retries", layer))
	if err != nil {
		panic(err)
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^retry/(immediate-success|always-503)$`, "")
	for _, res := range r.Run(context.Background(), scenarios).Results {
		fmt.Println(res.Contract, res.Pass, res.Observed.ClientAttempts)
		for _, m := range res.Mismatches {
			fmt.Println("  ", m)
		}
		if res.Fix != "" {
			fmt.Println("   fix:", res.Fix)
		}
	}
	// Output:
	// A1 true 1
	// A3 false 4
	//    A3: 4 attempts where MaxRetries=2 allows 3: the layer does not apply MaxRetries
	//    A3: 503 was retried: 4 requests, contract 3
	//    fix: in the retry layer: apply MaxRetries: stop after 2 retries (3 attempts), and hand the caller the last response
}
