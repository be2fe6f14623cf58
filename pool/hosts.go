package pool

import (
	"net"
	"strconv"
)

// hostCache remembers the host key and counters of a request's scheme and
// Host, so that a run of requests to one host (the common case) does not
// parse and hash the host name for each.
type hostCache struct {
	scheme, host, key string
	hc                *counters
}

// requestHostLocked returns the host key ([hostKey]) and counters of a
// request to host over scheme.
func (p *Pool) requestHostLocked(scheme, host string) (string, *counters) {
	if c := &p.lastHost; c.hc != nil && c.host == host && c.scheme == scheme {
		return c.key, c.hc
	}
	key := hostKey(scheme, host)
	hc := p.hostLocked(key)
	p.lastHost = hostCache{scheme: scheme, host: host, key: key, hc: hc}
	return key, hc
}

func (p *Pool) hostLocked(addr string) *counters {
	h := p.hosts[addr]
	if h == nil {
		h = &counters{closedBy: map[CloseReason]int64{}}
		p.hosts[addr] = h
	}
	return h
}

// hostKey returns the address the Transport dials for a request to u's
// host: host:port with the scheme's default port.
func hostKey(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := 80
	if scheme == "https" {
		port = 443
	}
	return net.JoinHostPort(trimBrackets(host), strconv.Itoa(port))
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}
