package pool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/notify"
	"go.uber.org/goleak"
)

// quietLocked reports whether nothing is in motion: no dial in progress,
// no request between RoundTrip and its response, and every active
// connection held only by open response bodies.
func (p *Pool) quietLocked() bool {
	if p.total.dialing > 0 || p.total.waiting > 0 {
		return false
	}
	for r := range p.reqs.all() {
		if !r.bodyOpen {
			return false
		}
	}
	for _, c := range p.conns {
		if c.State != StateActive {
			continue
		}
		for id := range c.active.all() {
			if r := p.reqs.get(id); r == nil || !r.bodyOpen {
				return false
			}
		}
	}
	return true
}

// Quiesce waits until the pool is quiet — no dial in progress, no request
// waiting for a connection or for its response, no connection active
// except those held by open response bodies — or ctx ends, whose error it
// then returns.
func (p *Pool) Quiesce(ctx context.Context) error {
	if err := notify.Wait(ctx, &p.mu, &p.changes, p.quietLocked); err != nil {
		return fmt.Errorf("pool: did not settle: %s: %w", p.describeMotion(), err)
	}
	return nil
}

func (p *Pool) describeMotion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	if n := p.total.dialing; n > 0 {
		parts = append(parts, fmt.Sprintf("%d dial(s) in progress", n))
	}
	if n := p.total.waiting; n > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) waiting for a connection", n))
	}
	n := 0
	for r := range p.reqs.all() {
		if !r.bodyOpen && !r.waiting {
			n++
		}
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) awaiting a response", n))
	}
	if len(parts) == 0 {
		parts = append(parts, "connections still active")
	}
	return strings.Join(parts, ", ")
}

// Check waits for the pool to settle (bounded by ctx) and returns one error
// naming every problem, or nil: response bodies still open, with where they
// were opened; connections still active, with the requests holding them;
// more connections open to a host than its cap.
func (p *Pool) Check(ctx context.Context) error {
	var errs []error
	if err := p.Quiesce(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, b := range p.OpenBodies() {
		msg := fmt.Sprintf("open body: %s %s (request %d) pins connection #%d, open for %s",
			b.Method, b.URL, b.Timeline, b.Conn, b.Age.Round(time.Millisecond))
		if b.Collected {
			msg += " (garbage collected without Close)"
		}
		if b.Stack != "" {
			msg += "; opened at:\n" + indent(b.Stack)
		}
		errs = append(errs, errors.New(msg))
	}
	p.mu.Lock()
	var active []*connState
	for _, c := range p.conns {
		if c.State == StateActive {
			active = append(active, c)
		}
	}
	sort.Slice(active, func(i, j int) bool { return active[i].ID < active[j].ID })
	for _, c := range active {
		var holders []string
		for id := range c.active.all() {
			if r := p.reqs.get(id); r != nil {
				state := "in flight"
				if r.bodyOpen {
					state = "body open"
				}
				holders = append(holders, fmt.Sprintf("%s %s (request %d, %s)", r.method, redactedURL(r), id, state))
			} else {
				holders = append(holders, fmt.Sprintf("request %d", id))
			}
		}
		sort.Strings(holders)
		errs = append(errs, fmt.Errorf("active connection #%d to %s held by %s", c.ID, c.Host, strings.Join(holders, ", ")))
	}
	if p.maxConn > 0 {
		hosts := make([]string, 0, len(p.hosts))
		for k := range p.hosts {
			hosts = append(hosts, k)
		}
		sort.Strings(hosts)
		for _, k := range hosts {
			if h := p.hosts[k]; h.open-h.doomed > p.maxConn {
				errs = append(errs, fmt.Errorf("%d connections open to %s, cap %d", h.open-h.doomed, k, p.maxConn))
			}
		}
	}
	if err := p.total.stats().Check(); err != nil {
		errs = append(errs, err)
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// leakCauses maps a function in a leaked goroutine's stack to its cause,
// in words.
var leakCauses = []struct{ fn, cause string }{
	{"net/http.(*persistConn).readLoop", "connection held by an unclosed response body or an idle connection"},
	{"net/http.(*persistConn).writeLoop", "connection held by an unclosed response body or an idle connection"},
	{"net/http.(*http2ClientConn).readLoop", "an HTTP/2 connection still open (idle or with a stream whose body was not closed)"},
	{"net/http.(*Transport).dialConnFor", "a dial still in flight"},
	{"net.(*netFD).connect", "a dial still in flight"},
	{"net.(*sysDialer)", "a dial still in flight"},
	{"net.(*Resolver)", "a DNS lookup still in flight"},
	{"crypto/tls.(*Conn).HandshakeContext", "a TLS handshake still in flight"},
	{"net/http.(*conn).serve", "a server connection still open"},
	{"net/http.(*Server).Serve", "a server still running"},
	{"net/http.(*Transport).getConn", "a request waiting for a connection (the pool is at its cap)"},
	{"net/http.(*persistConn).roundTrip", "a request still in flight"},
	{"net/http.setRequestCancel", "a request still in flight"},
}

// nameStacks returns "N × cause (function)" for each known cause among the
// goroutine stacks in text: goleak's list, where each goroutine is headed by
// "Goroutine N in state S, with F on top of the stack:" and goroutines are
// not separated by blank lines, or runtime.Stack's dump, where each starts
// with "goroutine N [S]:". A goroutine is named by its own frames, not by
// the "created by" line naming its parent.
func nameStacks(text string) []string {
	start := goleakHeader
	if !start.MatchString(text) {
		start = runtimeHeader
	}
	var blocks []string
	idx := start.FindAllStringIndex(text, -1)
	for i, m := range idx {
		end := len(text)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		blocks = append(blocks, text[m[0]:end])
	}
	counts := map[string]int{}
	for _, block := range blocks {
		block = createdBy.ReplaceAllString(block, "")
		for _, lc := range leakCauses {
			if strings.Contains(block, lc.fn) {
				counts[lc.cause+" ("+lc.fn+")"]++
				break
			}
		}
	}
	names := make([]string, 0, len(counts))
	for k, n := range counts {
		names = append(names, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(names)
	return names
}

var (
	goleakHeader  = regexp.MustCompile(`Goroutine \d+ in state `)
	runtimeHeader = regexp.MustCompile(`(?m)^goroutine \d+ \[`)
	createdBy     = regexp.MustCompile(`(?m)^created by .*$`)
)

// NameLeaks returns err (from goleak) with a summary in words of the causes
// of the net/http goroutines it lists.
func NameLeaks(err error) error {
	if err == nil {
		return nil
	}
	names := nameStacks(err.Error())
	if len(names) == 0 {
		return err
	}
	return fmt.Errorf("leaked goroutines: %s\n%w", strings.Join(names, "; "), err)
}

// NetGoroutines names, by cause in words, the net/http and net goroutines
// running now, such as "2 × connection held by an unclosed response body or
// an idle connection (net/http.(*persistConn).readLoop)". It looks once and
// does not wait for goroutines to end.
func NetGoroutines() []string {
	buf := make([]byte, 1<<20)
	for range 4 {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return nameStacks(string(buf[:n]))
		}
		buf = make([]byte, 2*len(buf))
	}
	return nameStacks(string(buf))
}

// VerifyNone fails t if p does not pass [Pool.Check] within a few seconds or
// goroutines leaked (goleak, with opts), naming leaked net/http goroutines
// by cause. Call it at the end of a test, after closing what the test
// opened; it closes p's idle connections first so that they are not counted
// as leaks.
func VerifyNone(t testing.TB, p *Pool, opts ...goleak.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if err := p.Check(ctx); err != nil {
		errs = append(errs, err)
	}
	p.CloseIdleConnections()
	if err := goleak.Find(opts...); err != nil {
		errs = append(errs, NameLeaks(err))
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}
