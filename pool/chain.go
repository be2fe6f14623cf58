package pool

import (
	"errors"
	"net/http"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/isnil"
)

// trackChain returns a pool whose requests go through top, a RoundTripper
// of the caller's (a wrapper, another package's transport), with opts.
// inner, when not nil, is the *http.Transport top sends requests through:
// it is tracked in place, not cloned (the caller hands it over unused), its
// settings changed by opts as [Track]'s clone's are. Without inner the
// pool tracks only the connections dialed through [Pool.trackDial], which
// dials says top's dials go through; its transport is a placeholder that
// carries no request.
func trackChain(top http.RoundTripper, inner *http.Transport, dials bool, opts []Option) (*Pool, error) {
	if isnil.Value(top) {
		return nil, errors.New("pool: nil RoundTripper to track")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if inner == nil {
		return build(&http.Transport{}, nil, cfg, nil, top, dials)
	}
	// net/http's one-time HTTP/2 set-up runs at inner's first request,
	// with the settings the options leave: a TLS configuration of the
	// pool's then offers h2 when HTTP/2 is on.
	dial, dialer := dialOf(inner)
	return build(inner, dial, cfg, dialer, top, true)
}

// trackDial returns dial wrapped so that p tracks each connection it
// returns, a TLS connection whose handshake is done, bounded by p's
// ConnectTimeout if it has one.
func (p *Pool) trackDial(dial dialFunc) dialFunc {
	if p.cfg.connectTimeout != nil {
		dial = connectTimeout(dial, nil, *p.cfg.connectTimeout)
	}
	return p.dialer(dial, false)
}

func init() {
	hook.TrackChain = func(top http.RoundTripper, inner *http.Transport, dials bool, opts any) (any, error) {
		o, _ := opts.([]Option)
		return trackChain(top, inner, dials, o)
	}
	hook.TrackDial = func(p any, dial hook.DialFunc) hook.DialFunc { return p.(*Pool).trackDial(dial) }
}
