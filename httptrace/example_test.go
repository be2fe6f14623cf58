package httptrace_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
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

	base := &http.Transport{} // any RoundTripper: it is wrapped, never changed
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
	fmt.Println(httptrace.Classify(io.ErrUnexpectedEOF, "body"))
	fmt.Println(httptrace.Classify(io.ErrUnexpectedEOF, "await-headers"))
	fmt.Println(httptrace.Classify(errors.New("net/http: TLS handshake timeout"), "tls"))
	// Output:
	// body-truncated
	// server-closed
	// tls-handshake-timeout
}

// ExampleTrace traces one request in three lines: build it, trace it,
// write its waterfall (here only the lines that do not vary from run to
// run are printed).
func ExampleTrace() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	tl, err := httptrace.Trace(nil, req)
	if err != nil {
		panic(err)
	}
	// tl.WriteText(os.Stdout, true) writes the whole waterfall.
	var b strings.Builder
	tl.WriteText(&b, true)
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "  outcome") || strings.HasPrefix(line, "  response") {
			fmt.Print(line)
		}
	}
	fmt.Println(tl.Conn.New(), tl.Count("connect-start"), tl.Count("done"))
	// Output:
	//   response    200 HTTP/1.1, 2 body bytes
	//   outcome     ok
	// true 1 1
}

// ExampleNewSlogObserver logs each request's stages through log/slog, and
// warns of a response body left open past the threshold. The handler here
// drops the attributes that vary from run to run.
func ExampleNewSlogObserver() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	keep := map[string]bool{"msg": true, "level": true, "method": true, "outcome": true, "status": true, "new_conn": true}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if !keep[a.Key] {
				return slog.Attr{}
			}
			return a
		},
	}))
	held := make(chan struct{})
	obs := httptrace.Multi(
		httptrace.NewSlogObserver(logger, slog.LevelDebug, slog.LevelWarn),
		eventFunc(func(ev httptrace.Event) {
			if ev.Kind == httptrace.KindBodyHeld {
				close(held)
			}
		}))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := httptrace.NewTransport(base, httptrace.WithObserver(obs),
		httptrace.UnclosedBodyWarning(10*time.Millisecond))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	<-held // the body stayed open past the threshold: warned
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the request is logged here
	// Output:
	// level=WARN msg="response body not closed" method=GET
	// level=DEBUG msg="http request" method=GET outcome=ok status=200 new_conn=true
}

// eventFunc is an EventObserver of the events alone.
type eventFunc func(httptrace.Event)

func (f eventFunc) Observe(*httptrace.Timeline)                            {}
func (f eventFunc) ObserveEvent(_ *httptrace.Timeline, ev httptrace.Event) { f(ev) }
