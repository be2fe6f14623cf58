package testserver

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

type perConnKey struct{}

// ServeOK sets up hs, not yet started, to answer "ok" to every request
// and, with closeEvery > 0, to set "Connection: close" on every
// closeEvery-th response of each connection. It counts the requests it
// answers in requests and the connections it accepts in accepted (either
// may be nil), and it logs nothing.
func ServeOK(hs *httptest.Server, closeEvery int, requests *atomic.Int64, accepted *Counter) {
	hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests != nil {
			requests.Add(1)
		}
		n := r.Context().Value(perConnKey{}).(*atomic.Int64).Add(1)
		if closeEvery > 0 && n%int64(closeEvery) == 0 {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	})
	hs.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, perConnKey{}, new(atomic.Int64))
	}
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew && accepted != nil {
			accepted.Add(1)
		}
	}
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
}
