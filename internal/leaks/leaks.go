// Package leaks names leaked goroutines by their cause, in words: the
// goroutines of net/http and net that a connection, a dial or a request
// left behind.
package leaks

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"
)

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

// Name returns err (from goleak) with a summary in words of the causes of
// the net/http goroutines it lists.
func Name(err error) error {
	if err == nil {
		return nil
	}
	names := nameStacks(err.Error())
	if len(names) == 0 {
		return err
	}
	return fmt.Errorf("leaked goroutines: %s\n%w", strings.Join(names, "; "), err)
}

// Goroutines names, by cause in words, the net/http and net goroutines
// running now, such as "2 × connection held by an unclosed response body or
// an idle connection (net/http.(*persistConn).readLoop)". It looks once and
// does not wait for goroutines to end.
func Goroutines() []string {
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

// group is one group of goroutines of a goroutine profile (debug=1):
// goroutines with one stack and one set of labels.
type group struct {
	n      int
	labels string // the "# labels: {…}" line, "" without labels
	text   string // the group as the profile wrote it
}

// profile reads the goroutine profile of the process now.
func profile() []group {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return nil
	}
	var out []group
	for _, block := range strings.Split(b.String(), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(lines[0], "%d @", &n); err != nil {
			continue // the profile's heading
		}
		g := group{n: n, text: block}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "# labels: ") {
				g.labels = l
			}
		}
		out = append(out, g)
	}
	return out
}

// own reports whether g is the goroutine reading the profile.
func (g group) own() bool { return strings.Contains(g.text, "runtime/pprof.writeRuntimeProfile") }

// labeled reports whether g carries the pprof label key=value.
func (g group) labeled(key, value string) bool {
	return strings.Contains(g.labels, strconv.Quote(key)+":"+strconv.Quote(value))
}

// name says what a group of goroutines is, in words: "2 × connection held
// by … (net/http.(*persistConn).readLoop)", or its top function.
func (g group) name() string {
	for _, lc := range leakCauses {
		if strings.Contains(g.text, "\t"+lc.fn) {
			return fmt.Sprintf("%d × %s (%s)", g.n, lc.cause, lc.fn)
		}
	}
	for _, l := range strings.Split(g.text, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && strings.HasPrefix(f[1], "0x") &&
			!strings.HasPrefix(f[2], "runtime.") && !strings.HasPrefix(f[2], "internal/") {
			fn, _, _ := strings.Cut(f[2], "+0x")
			return fmt.Sprintf("%d × goroutine in %s", g.n, fn)
		}
	}
	return fmt.Sprintf("%d × goroutine", g.n)
}

// Labeled names, by cause in words, the goroutines running now that carry
// the pprof label key=value (and so were started, directly or not, by
// code run under it), but the caller's own. It looks once.
func Labeled(key, value string) []string {
	var names []string
	for _, g := range profile() {
		if g.labeled(key, value) && !g.own() {
			names = append(names, g.name())
		}
	}
	sort.Strings(names)
	return names
}

// WaitLabeled waits until no goroutine but the caller's carries the pprof
// label key=value, or ctx ends; it then returns an error naming those left
// and their stacks. Goroutines that are ending are waited for, as goleak
// waits for them.
func WaitLabeled(ctx context.Context, key, value string) error {
	return waitFor(ctx, func() []group {
		var left []group
		for _, g := range profile() {
			if g.labeled(key, value) && !g.own() {
				left = append(left, g)
			}
		}
		return left
	})
}

// waitFor polls left, backing off from 1ms to 100ms, until it is empty or
// ctx ends, and names what it still returns then.
func waitFor(ctx context.Context, left func() []group) error {
	sleep := time.Millisecond
	for {
		gs := left()
		if len(gs) == 0 {
			return nil
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
			sleep = min(2*sleep, 100*time.Millisecond)
			continue
		case <-ctx.Done():
			t.Stop()
		}
		var names, stacks []string
		for _, g := range gs {
			names = append(names, g.name())
			stacks = append(stacks, g.text)
		}
		sort.Strings(names)
		return fmt.Errorf("leaked goroutines: %s\n%s", strings.Join(names, "; "), strings.Join(stacks, "\n\n"))
	}
}
