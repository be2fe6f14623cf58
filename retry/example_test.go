package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/retry"
)

func ExamplePolicy_DoWithReport() {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if seen.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()

	p := retry.Default()
	p.Delay = 10 * time.Millisecond
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, rep, err := p.DoWithReport(context.Background(), &http.Client{Transport: tr}, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)

	for _, a := range rep.Attempts {
		fmt.Println(a)
	}
	fmt.Printf("stop: %s; body %q; attempts %d, server saw %d\n", rep.Stop, body, len(rep.Attempts), seen.Load())
	// Output:
	// attempt 1: 503 Service Unavailable
	// attempt 2: 503 Service Unavailable
	// attempt 3: 200 OK
	// stop: final; body "ok"; attempts 3, server saw 3
}

func ExamplePolicy_Validate() {
	p := retry.Policy{AttemptTimeout: 5 * time.Second, TotalTimeout: 2 * time.Second, MaxRetries: -1}
	fmt.Println(p.Validate())
	// Output:
	// retry: invalid policy: AttemptTimeout 5s is longer than TotalTimeout 2s
	// retry: invalid policy: MaxRetries -1 is negative
}
