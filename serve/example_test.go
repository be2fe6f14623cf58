package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/connaudit/connaudit/serve"
)

// A kit's session, in Go: open it, fetch the scenarios, run one through
// the client under test, report what the caller got, say done.
func Example() {
	srv, err := serve.New()
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctl := func(method, url string, in, out any) {
		b, _ := json.Marshal(in)
		req, _ := http.NewRequest(method, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(out)
	}
	var opened serve.Opened
	ctl("POST", srv.URL()+"/v1/sessions", serve.OpenRequest{Protocol: serve.Protocol, Kit: "example",
		Client: serve.Client{Name: "net/http"}, Run: "^status-503$"}, &opened)
	var list serve.Scenarios
	ctl("GET", opened.ScenariosURL, nil, &list)
	sc := list.Scenarios[0]
	fmt.Println(sc.Name, sc.Steps, "expect", sc.Expect.Status)

	client := &http.Client{Transport: &http.Transport{}} // the client under test
	get := func(url string) *serve.Outcome {
		resp, err := client.Get(url)
		if err != nil {
			return &serve.Outcome{Error: &serve.ErrorOutcome{Kind: serve.KindConnection, Message: err.Error()}}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return &serve.Outcome{Status: resp.StatusCode}
	}
	rep := serve.KitReport{Scenario: sc.Name, Outcome: get(sc.URL), OK: get(sc.OKURL)}
	var res serve.Result
	ctl("POST", opened.ReportURL, rep, &res)
	fmt.Println(res.Pass, res.Class, res.Server.Requests, res.Fate)

	client.CloseIdleConnections()
	var done serve.SessionReport
	ctl("POST", opened.DoneURL, serve.Done{}, &done)
	fmt.Println(done.Passed, done.Failed, done.OK)
	// Output:
	// status-503 request expect 503
	// true ok 1 reused
	// 1 0 true
}
