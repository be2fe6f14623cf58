package probe

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxKeepAliveHeader bounds the Keep-Alive header value a report quotes.
const maxKeepAliveHeader = 200

// keepAliveSeen is what one sender saw of the server's Keep-Alive
// response headers ("timeout=5, max=100").
type keepAliveSeen struct {
	first     string // the first value, as the report quotes it
	last      string // the last value parsed, to skip parsing it again
	responses int
	timeout   time.Duration
	max       int
}

// see records a response's Keep-Alive header value; mask masks the
// request's secrets in the value the report quotes.
func (k *keepAliveSeen) see(v string, mask func(string) string) {
	k.responses++
	if k.responses == 1 {
		k.first = quoteHeader(mask(v))
	}
	if v == k.last {
		return
	}
	k.last = v
	t, m := parseKeepAlive(v)
	k.timeout, k.max = max(k.timeout, t), max(k.max, m)
}

// merge adds what another sender saw; o's first value is taken if k has
// none.
func (k *keepAliveSeen) merge(o *keepAliveSeen) {
	if k.responses == 0 {
		k.first = o.first
	}
	k.responses += o.responses
	k.timeout, k.max = max(k.timeout, o.timeout), max(k.max, o.max)
}

func (k *keepAliveSeen) fill(rep *Result) {
	if k.responses == 0 {
		return
	}
	rep.KeepAlive.Header = k.first
	rep.KeepAlive.Responses = k.responses
	rep.KeepAlive.Timeout = k.timeout
	rep.KeepAlive.Max = k.max
}

// parseKeepAlive reads the timeout (seconds) and max parameters of a
// Keep-Alive header value (RFC 2068, 19.7.1.1; "timeout=5, max=100"). A
// parameter missing, malformed or out of range is 0.
func parseKeepAlive(v string) (timeout time.Duration, maxRequests int) {
	for part := range strings.SplitSeq(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "timeout":
			if n <= 1_000_000 { // about 11 days: more is no timeout to speak of
				timeout = time.Duration(n) * time.Second
			}
		case "max":
			maxRequests = n
		}
	}
	return timeout, maxRequests
}

// quoteHeader makes a header value fit a report: on one line, printable,
// at most maxKeepAliveHeader bytes.
func quoteHeader(v string) string {
	if len(v) > maxKeepAliveHeader {
		v = v[:maxKeepAliveHeader]
		for i := 0; i < utf8.UTFMax && !utf8.ValidString(v); i++ {
			v = v[:len(v)-1] // a rune cut in two
		}
		v += "…"
	}
	return oneLine(v)
}
