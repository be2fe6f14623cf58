package audittest_test

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/audit/audittest"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
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

// ourRetrier stands for a service's own retry layer.
type ourRetrier struct {
	next    http.RoundTripper
	retries int
}

func (r *ourRetrier) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.next.RoundTrip(req)
}

// ExampleRunContracts is the test of a retry layer alone: the retry
// contracts, set from each contract's policy, and none of the scenarios
// of the transport, which do not use the layer. Add audit.WithTransport to
// run the layer over the service's own transport.
func ExampleRunContracts() {
	TestRetryLayer := func(t *testing.T) {
		audittest.RunContracts(t, audit.WithRetryTransport("ours",
			func(base http.RoundTripper, p retry.Policy) (http.RoundTripper, error) {
				if p.UnsafeRetryNonIdempotent || p.RetryIdempotencyKey {
					return nil, errors.New("never replays a POST") // not configurable, not failed
				}
				return &ourRetrier{next: base, retries: p.MaxRetries}, nil
			}))
	}
	_ = TestRetryLayer
}
