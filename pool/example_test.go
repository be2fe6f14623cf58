package pool_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/connaudit/connaudit/pool"
)

// Each connection's end reaches a hook, with who closed it and why: here
// the server, whose response said "Connection: close".
func ExampleOnConnClose() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	closed := make(chan pool.Conn, 1)
	p, err := pool.New(pool.OnConnClose(func(c pool.Conn) { closed <- c }))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	resp, err := p.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	c := <-closed
	fmt.Println(c.ClosedBy, c.CloseReason, c.Proto)
	// Output: server connection-close HTTP/1.1
}
