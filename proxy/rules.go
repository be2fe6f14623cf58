package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Rule is one fault the proxy injects, and the requests or connections
// it touches. [ParseRule] reads one from its text; docs/proxy.md defines
// the format. The zero Rule is no rule: [Faults] refuses it.
type Rule struct {
	text   string
	action action
	status int           // status=CODE
	dur    time.Duration // delay-headers=D, idle-close=T, go-dark=T
	bytes  int64         // stall-body=N
	after  bool          // at=after-upstream: the request is forwarded first
	// What a request must be for the rule to touch it.
	nth      int           // its index on its connection (1: the first)
	reused   bool          // on a connection that served one before
	idle     time.Duration // the connection idle at least this long before it
	method   string
	path     string // a prefix of its path
	share    float64
	times    int // at most this many times (0: no limit)
	hasShare bool
}

// action is what a rule does.
type action string

// The rules' actions; their words are the catalogue's faults.
const (
	actReset        action = "reset"         // reset the connection (RST)
	actClose        action = "close"         // close the connection (FIN)
	actStatus       action = "status"        // answer with a status, not forwarded
	actDelayHeaders action = "delay-headers" // hold the response's headers
	actStallBody    action = "stall-body"    // stall the response's body after N bytes
	actGoAway       action = "goaway"        // HTTP/2: GOAWAY on the connection
	actIdleClose    action = "idle-close"    // close a connection idle for T
	actGoDark       action = "go-dark"       // a connection idle for T goes dark
)

// connLevel says whether the action is a connection's (by its idle time),
// not a request's.
func (a action) connLevel() bool { return a == actIdleClose || a == actGoDark }

// String returns the rule as its text was given, spaces normalised.
func (r Rule) String() string { return r.text }

// ParseRule reads one rule: an action, then the keys that select what it
// touches, separated by spaces:
//
//	reset nth=3                    reset the 3rd request's connection, before forwarding it
//	close at=after-upstream method=POST   forward the POST, then close without its response
//	status=503 times=2             answer 503 twice, then pass
//	delay-headers=30s path=/slow   hold the response's headers 30s
//	stall-body=1024                stall each response's body after 1024 bytes
//	goaway nth=5                   HTTP/2: GOAWAY on a connection at its 5th request
//	idle-close=5s                  close a connection idle for 5s
//	go-dark=5s share=0.5           half of the connections idle for 5s go dark
//
// A malformed rule is an error that says what is wrong.
func ParseRule(s string) (Rule, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Rule{}, errors.New("proxy: empty fault rule")
	}
	r := Rule{text: strings.Join(fields, " ")}
	fail := func(format string, a ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("proxy: fault %q: %s", r.text, fmt.Sprintf(format, a...))
	}
	name, arg, hasArg := strings.Cut(fields[0], "=")
	r.action = action(name)
	switch r.action {
	case actReset, actClose, actGoAway:
		if hasArg {
			return fail("%s takes no value", name)
		}
	case actStatus:
		code, err := strconv.Atoi(arg)
		if err != nil || code < 200 || code > 599 {
			return fail("status=CODE needs a code from 200 to 599, not %q", arg)
		}
		r.status = code
	case actDelayHeaders, actIdleClose, actGoDark:
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return fail("%s=D needs a positive duration such as 5s, not %q", name, arg)
		}
		r.dur = d
	case actStallBody:
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return fail("stall-body=N needs a byte count of 0 or more, not %q", arg)
		}
		r.bytes = n
	default:
		return fail("unknown action %q (reset, close, status=CODE, delay-headers=D, stall-body=N, goaway, idle-close=T, go-dark=T)", name)
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			if f == "reused" && !r.action.connLevel() {
				r.reused = true
				continue
			}
			return fail("%q is not KEY=VALUE", f)
		}
		if r.action.connLevel() && k != "share" {
			return fail("%s is a connection's rule: it takes share= alone, not %s=", name, k)
		}
		switch k {
		case "nth":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fail("nth=N needs a request index from 1, not %q", v)
			}
			r.nth = n
		case "idle":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fail("idle=D needs a positive duration, not %q", v)
			}
			r.idle = d
		case "method":
			if strings.ToUpper(v) != v || strings.ContainsAny(v, "/:") {
				return fail("method=%s: a method is upper case, such as POST", v)
			}
			r.method = v
		case "path":
			if !strings.HasPrefix(v, "/") {
				return fail("path=%s: a path starts with /", v)
			}
			r.path = v
		case "share":
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || !(p > 0 && p <= 1) {
				return fail("share=P needs a share in (0, 1], not %q", v)
			}
			r.share, r.hasShare = p, true
		case "times":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fail("times=K needs a count from 1, not %q", v)
			}
			r.times = n
		case "at":
			if r.action != actReset && r.action != actClose {
				return fail("at= is for reset and close")
			}
			switch v {
			case "before-upstream":
			case "after-upstream":
				r.after = true
			default:
				return fail("at=%s: before-upstream or after-upstream", v)
			}
		default:
			return fail("unknown key %q (nth, reused, idle, method, path, share, times, at)", k)
		}
	}
	return r, nil
}

// ParseRules reads rules from r, one a line; a line that is blank or
// starts with # is skipped. An error names the line.
func ParseRules(r io.Reader) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		rule, err := ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proxy: reading rules: %w", err)
	}
	return rules, nil
}

// rule is a Rule in force: its count and its draws.
type rule struct {
	Rule
	index int
	mu    sync.Mutex
	rng   *rand.Rand
	hits  int
}

func newRule(r Rule, index int, seed uint64) *rule {
	return &rule{Rule: r, index: index, rng: rand.New(rand.NewPCG(seed, uint64(index)+1))}
}

// reqFacts are what a request rule matches on.
type reqFacts struct {
	nth    int
	idle   time.Duration // the connection's idle time before it (0 on a fresh one)
	method string
	path   string
	h2     bool
}

// matches says whether the rule touches the request, and counts it: a
// share draws from the rule's own generator, once per request that
// matches all else, so that runs with one seed and one order of requests
// fault the same ones.
func (r *rule) matches(f reqFacts) bool {
	if r.action.connLevel() || (r.action == actGoAway && !f.h2) {
		return false
	}
	if (r.nth > 0 && f.nth != r.nth) || (r.reused && f.nth < 2) || (r.idle > 0 && f.idle < r.idle) ||
		(r.method != "" && f.method != r.method) || (r.path != "" && !strings.HasPrefix(f.path, r.path)) {
		return false
	}
	return r.take()
}

// take draws the rule's share and counts its times.
func (r *rule) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.times > 0 && r.hits >= r.times {
		return false
	}
	if r.hasShare && r.rng.Float64() >= r.share {
		return false
	}
	r.hits++
	return true
}

// name is how the report names the rule's fault.
func (r *rule) name() string {
	switch r.action {
	case actStatus:
		return "status=" + strconv.Itoa(r.status)
	case actReset, actClose:
		if r.after {
			return string(r.action) + "-after-upstream"
		}
		return string(r.action) + "-before-upstream"
	}
	return string(r.action)
}
