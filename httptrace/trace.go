package httptrace

import (
	"errors"
	"io"
	"net/http"

	"github.com/connaudit/connaudit/internal/defaults"
)

// Trace sends req through rt, reads the response body to its end, closes
// it, and returns the request's finished timeline, with the request's
// error if it failed (the timeline is returned either way). A nil rt is a
// fresh transport with http.DefaultTransport's settings, closed when Trace
// returns, so that the timeline shows the DNS lookup, connect and TLS
// handshake of a new connection. opts are a [Transport]'s; an observer
// among them sees the timeline too.
//
// Trace wraps rt without changing it: http.DefaultTransport, or any
// RoundTripper, may be passed.
func Trace(rt http.RoundTripper, req *http.Request, opts ...Option) (*Timeline, error) {
	if req == nil {
		return nil, errors.New("httptrace: nil request")
	}
	if rt == nil {
		tr := defaults.Transport(defaults.Dialer())
		defer tr.CloseIdleConnections()
		rt = tr
	}
	var tl *Timeline
	keep := ObserverFunc(func(done *Timeline) { tl = done.Clone() })
	t, err := NewTransport(rt, append([]Option{WithObserver(keep)}, opts...)...)
	if err != nil {
		return nil, err
	}
	resp, err := t.RoundTrip(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
	}
	return tl, err
}
