// Package leaks names leaked goroutines by their cause, in words: the
// goroutines of net/http and net that a connection, a dial or a request
// left behind.
package leaks

import (
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
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
