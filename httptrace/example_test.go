package httptrace_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// Example traces two requests to a server: the first dials, the second
// reuses the kept-alive connection. Each timeline carries the outcome, the
// status, whether the connection was new, and the redacted URL.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "short and stout")
	}))
	defer srv.Close()

	base := &http.Transport{} // a transport of your own, never http.DefaultTransport
	defer base.CloseIdleConnections()
	var c httptrace.Collector
	tr, err := httptrace.NewTransport(base, httptrace.WithObserver(&c))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}

	for range 2 {
		resp, err := client.Get(srv.URL + "/pot?token=secret")
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // the timeline is finished here
	}
	for _, tl := range c.Timelines() {
		fmt.Printf("%s %d new=%t bytes=%d %s\n", tl.Outcome.Class, tl.Outcome.Status, tl.Conn.New(), tl.BodyBytes,
			strings.TrimPrefix(tl.URL(), srv.URL))
	}
	// Output:
	// ok 418 new=true bytes=15 /pot?token=REDACTED
	// ok 418 new=false bytes=15 /pot?token=REDACTED
}

// ExampleClassify names the class of a failure from the error and the
// stage the request was in.
func ExampleClassify() {
	fmt.Println(httptrace.Classify(io.ErrUnexpectedEOF, vocab.StageBody))
	fmt.Println(httptrace.Classify(io.ErrUnexpectedEOF, vocab.StageAwaitHeaders))
	fmt.Println(httptrace.Classify(errors.New("net/http: TLS handshake timeout"), vocab.StageTLS))
	// Output:
	// body-truncated
	// server-closed
	// tls-handshake-timeout
}
