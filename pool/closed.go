package pool

import (
	"context"
	"errors"
	"net/http"
)

// ErrClosed is the error of a request sent through a pool's [Pool.Client]
// or [Pool.RoundTripper] after [Pool.Close] (errors.Is finds it in the
// Client's *url.Error).
var ErrClosed = errors.New("pool: closed")

// errNilPool is the error of a method called on a nil *Pool.
var errNilPool = errors.New("pool: method called on a nil *Pool")

// errNilContext is the error of a method given a nil context.
var errNilContext = errors.New("pool: nil context")

// refuse closes req's body, as a RoundTripper must, and returns err.
func refuse(req *http.Request, err error) (*http.Response, error) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
	return nil, err
}

// refusing is a RoundTripper that refuses every request with err: a nil
// pool's.
type refusing struct{ err error }

func (r refusing) RoundTrip(req *http.Request) (*http.Response, error) { return refuse(req, r.err) }

// usable returns the error of a method that waits on p with ctx: p nil, or
// ctx nil.
func (p *Pool) usable(ctx context.Context) error {
	switch {
	case p == nil:
		return errNilPool
	case ctx == nil:
		return errNilContext
	}
	return nil
}
