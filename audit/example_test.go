package audit_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/connaudit/connaudit/audit"
)

// Example runs part of the catalogue against the reference pool and prints
// each scenario's verdict. In a test, fail on !rep.OK() and write the
// report with rep.WriteText(&b, false) into the failure message.
func Example() {
	scenarios, err := audit.Select(audit.Catalogue(), `^(ok|status-503|close-before-response)$`)
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
// ResponseHeaderTimeout, so a server that never answers is contained only
// by the audit's guard deadline, and the scenario fails as unbounded.
func ExampleWithTransport() {
	yours := func() *http.Transport { return &http.Transport{} }
	r, err := audit.NewRunner(audit.WithTransport("ours", yours), audit.GuardDeadline(300*time.Millisecond))
	if err != nil {
		panic(err)
	}
	scenarios, _ := audit.Select(audit.Catalogue(), `^response-header-timeout$`)
	res := r.Run(context.Background(), scenarios).Results[0]
	fmt.Println(res.Pass, res.Observed.Unbounded, res.Observed.UnboundedStage)
	// Output:
	// false true await-headers
}
