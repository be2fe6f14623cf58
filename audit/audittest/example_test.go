package audittest_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/audit/audittest"
	"github.com/connaudit/connaudit/pool"
)

// newTransport is the transport a service ships: bounds of seconds.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSHandshakeTimeout:   2 * time.Second,
		ResponseHeaderTimeout: 2 * time.Second,
		MaxConnsPerHost:       10,
		ForceAttemptHTTP2:     true,
	}
}

// ExampleRun is the test a service writes: the catalogue against its own
// transport, a subtest per scenario, so that
//
//	go test -run 'TestClient/^h2/' -v
//
// runs the HTTP/2 scenarios and lists a PASS or FAIL for each. No
// http.Transport field bounds a stalled body: pool.BodyIdleTimeout, after
// the factory, does.
func ExampleRun() {
	TestClient := func(t *testing.T) {
		audittest.Run(t, audit.WithTransport("ours", newTransport, pool.BodyIdleTimeout(2*time.Second)))
	}
	_ = TestClient
}
