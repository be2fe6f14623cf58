package audit_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

var (
	stressRuns = flag.Int("stress", 1, "run the catalogue this many times per transport shape of the stress set "+
		"and fail on any scenario whose verdict flips")
	stressPattern  = flag.String("stress.run", "", "with -stress, run only the scenarios whose name matches this regular expression")
	stressShape    = flag.String("stress.shape", "", "with -stress, run only the shapes whose name matches this regular expression")
	shapesParallel = flag.Int("shapes.parallel", 8, "run this many scenarios of a shape at once (audit.Parallel); 1: one after the other")
	update         = flag.Bool("update", false, "rewrite docs/shapes.md and the README's table of common transports")
)

// A shape is a client configuration the catalogue is run against.
type shape struct {
	name string // as the docs call it
	code string // the Go that builds it, for the docs
	opts func() []audit.Option
	// stress: one of the shapes whose verdicts must not flip; readme: one
	// of the README's common transports.
	stress, readme bool
	// keeps, for a shape whose setting keeps a connection from reuse, is
	// the fix every failure that rests on reuse must give: the setting,
	// never the retry layer nor "no transport setting". Over HTTP/1 no
	// check of reuse may pass; over HTTP/2 neither, when singleUse (keep-alives
	// off: one request per connection whatever the protocol).
	keeps     string
	singleUse bool
}

// serviceBound is the bound the stress shapes set on every stage: short,
// so the stress test runs in reasonable time, and far from the catalogue's
// other bounds (150ms context deadlines, a 1s retry attempt limit, the 2s
// guard), so that no two of them race.
const serviceBound = 500 * time.Millisecond

func protocols(h1, h2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(h1)
	p.SetHTTP2(h2)
	return p
}

func shapes() []shape {
	dialer := func(d time.Duration) *net.Dialer { return &net.Dialer{Timeout: d, KeepAlive: 30 * time.Second} }
	// bounded is http.DefaultTransport's clone with every stage bounded,
	// then edit.
	bounded := func(edit func(*http.Transport)) func() *http.Transport {
		return func() *http.Transport {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.DialContext = dialer(serviceBound).DialContext
			t.TLSHandshakeTimeout, t.ResponseHeaderTimeout = serviceBound, serviceBound
			edit(t)
			return t
		}
	}
	own := func(force bool) func() *http.Transport {
		return func() *http.Transport {
			return &http.Transport{DialContext: dialer(serviceBound).DialContext, ForceAttemptHTTP2: force,
				TLSHandshakeTimeout: serviceBound, ResponseHeaderTimeout: serviceBound, IdleConnTimeout: 90 * time.Second}
		}
	}
	return []shape{
		{name: "connaudit's defaults (the reference pool)", code: "audit.NewRunner()", stress: true, readme: true,
			opts: func() []audit.Option { return nil }},
		{name: "HTTP/1 only, own dialer and timeouts",
			code: "&http.Transport{DialContext: (&net.Dialer{Timeout: 500ms}).DialContext, TLSHandshakeTimeout: 500ms, " +
				"ResponseHeaderTimeout: 500ms, IdleConnTimeout: 90s} with pool.BodyIdleTimeout(500ms), " +
				"audit.Protocols: HTTP/1 only",
			stress: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("HTTP/1 only, own dialer", own(false), pool.BodyIdleTimeout(serviceBound)),
					audit.Protocols(protocols(true, false))}
			}},
		{name: "ForceAttemptHTTP2, own dialer and timeouts",
			code:   "the same with ForceAttemptHTTP2: true, audit.Protocols: HTTP/1 and HTTP/2",
			stress: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("ForceAttemptHTTP2, own dialer", own(true), pool.BodyIdleTimeout(serviceBound)),
					audit.Protocols(protocols(true, true))}
			}},
		{name: "http.DefaultTransport's clone, timeouts set",
			code: "http.DefaultTransport.(*http.Transport).Clone() with DialContext (Timeout 500ms), TLSHandshakeTimeout " +
				"and ResponseHeaderTimeout 500ms, pool.BodyIdleTimeout(500ms)",
			stress: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("http.DefaultTransport clone, timeouts set", bounded(func(*http.Transport) {}),
					pool.BodyIdleTimeout(serviceBound))}
			}},
		{name: "single-use connections: DisableKeepAlives",
			code:   "http.DefaultTransport's clone with timeouts set, as above, and DisableKeepAlives: true",
			stress: true, keeps: "DisableKeepAlives closes every connection after one request", singleUse: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("DisableKeepAlives", bounded(func(t *http.Transport) {
					t.DisableKeepAlives = true
				}), pool.BodyIdleTimeout(serviceBound))}
			}},
		{name: "a pool that never reuses: MaxIdleConnsPerHost -1",
			code: "http.DefaultTransport's clone with timeouts set, as above, and MaxIdleConnsPerHost: -1, " +
				"audit.Protocols: HTTP/1 only (HTTP/2 keeps its connection whatever the setting: its verdicts are the clone's)",
			stress: true, keeps: "MaxIdleConnsPerHost -1 keeps no idle connection",
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("MaxIdleConnsPerHost -1", bounded(func(t *http.Transport) {
					t.MaxIdleConnsPerHost = -1
				}), pool.BodyIdleTimeout(serviceBound)), audit.Protocols(protocols(true, false))}
			}},
		// No shape with a tiny idle timeout (IdleConnTimeout: 90, the unit
		// left out): net/http races its own idle timer there, a request
		// now and then failing with "http: idle connection timeout" on the
		// connection it was handed, so a scenario's reasons differ from
		// run to run (retry/total-budget, 1 run in about 10); over HTTP/2
		// it dials in a loop.
		{name: "&http.Transport{}", code: "&http.Transport{}", stress: true, readme: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("&http.Transport{}", func() *http.Transport { return &http.Transport{} })}
			}},
		{name: "http.DefaultTransport", code: "http.DefaultTransport.(*http.Transport).Clone()", stress: true, readme: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("http.DefaultTransport", func() *http.Transport {
					return http.DefaultTransport.(*http.Transport).Clone()
				})}
			}},
		{name: "a service transport: 2s dialer and TLS, 5s header timeouts, ForceAttemptHTTP2, body idle 2s",
			code: "&http.Transport{DialContext: (&net.Dialer{Timeout: 2s, KeepAlive: 30s}).DialContext, " +
				"TLSHandshakeTimeout: 2s, ResponseHeaderTimeout: 5s, MaxConnsPerHost: 10, ForceAttemptHTTP2: true} " +
				"with pool.BodyIdleTimeout(2s)",
			stress: true, readme: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("a service transport", serviceTransport, pool.BodyIdleTimeout(2*time.Second))}
			}},
		{name: "the same service transport under a RoundTripper retry layer of fixed settings",
			code: "the service transport above, under a RoundTripper that retries a 503 or an error of a GET 3 times, " +
				"10ms apart, whatever the policy says (audit.WithRetryTransport)",
			stress: true,
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("a service transport", serviceTransport, pool.BodyIdleTimeout(2*time.Second)),
					audit.WithRetryTransport("fixed: 3 retries", func(base http.RoundTripper, _ retry.Policy) (http.RoundTripper, error) {
						return &fixedRetries{next: base, retries: 3, delay: 10 * time.Millisecond}, nil
					})}
			}},
		{name: "a service transport: own 1s dialer, 1s TLS and 3s header timeouts, no ForceAttemptHTTP2",
			code: "&http.Transport{DialContext: (&net.Dialer{Timeout: 1s}).DialContext, TLSHandshakeTimeout: 1s, " +
				"ResponseHeaderTimeout: 3s, MaxIdleConnsPerHost: 10, IdleConnTimeout: 90s}, " +
				"audit.Protocols: HTTP/1 and HTTP/2",
			opts: func() []audit.Option {
				return []audit.Option{audit.WithTransport("a service transport", func() *http.Transport {
					return &http.Transport{DialContext: dialer(time.Second).DialContext, TLSHandshakeTimeout: time.Second,
						ResponseHeaderTimeout: 3 * time.Second, MaxIdleConnsPerHost: 10, IdleConnTimeout: 90 * time.Second}
				}), audit.Protocols(protocols(true, true))}
			}},
	}
}

// serviceTransport is the transport a service ships: bounds of seconds,
// as net/http's own defaults have them, and a cap of its own.
func serviceTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   2 * time.Second,
		ResponseHeaderTimeout: 5 * time.Second,
		MaxConnsPerHost:       10,
		ForceAttemptHTTP2:     true,
	}
}

// fixedRetries is a retry layer as services write them: a RoundTripper
// that retries a GET on a 503 or an error a fixed number of times, with a
// fixed delay, whatever a policy says.
type fixedRetries struct {
	next    http.RoundTripper
	retries int
	delay   time.Duration
}

func (f *fixedRetries) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := f.next.RoundTrip(req)
		again := attempt < f.retries && req.Method == http.MethodGet && (err != nil || resp.StatusCode == http.StatusServiceUnavailable)
		if !again {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		t := time.NewTimer(f.delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
		}
		t.Stop()
		if err := req.Context().Err(); err != nil {
			return nil, err
		}
	}
}

// verdict is one scenario's verdict, with the kinds of its reasons (each
// mismatch up to its first colon) and its fix: what must not change from
// run to run.
type verdict struct {
	result, reasons, fix string
}

func verdictOf(res audit.Result) verdict {
	v := verdict{result: "PASS", fix: res.Fix}
	switch {
	case res.Skipped != "":
		v.result, v.reasons = "SKIP", res.Skipped
	case !res.Pass:
		v.result = "FAIL"
		var kinds []string
		for _, m := range res.Mismatches {
			k, _, _ := strings.Cut(m, ":")
			kinds = append(kinds, k)
		}
		v.reasons = strings.Join(kinds, "; ")
	}
	return v
}

// TestTransportShapes runs the catalogue against common transport shapes.
// Every scenario must give one verdict per shape: run with -stress=N, the
// stress set runs N times and any verdict, reason or fix that changes from
// one run to another fails the test. Each shape's verdicts, failures and
// fixes are what docs/shapes.md and the README's table say (-update
// rewrites both), so a verdict that changed, or a stale table, fails it
// too.
func TestTransportShapes(t *testing.T) {
	if *stressRuns < 1 {
		t.Fatalf("-stress=%d: want at least 1", *stressRuns)
	}
	start := time.Now()
	var reports []audit.Report
	var all []shape
	flips := 0
	runs := 0
	scenarios := audit.Catalogue()
	if *stressRuns > 1 && *stressPattern != "" {
		var err error
		if scenarios, err = audit.Select(scenarios, *stressPattern, ""); err != nil {
			t.Fatal(err)
		}
	}
	var shapeRE *regexp.Regexp
	if *stressRuns > 1 && *stressShape != "" {
		var err error
		if shapeRE, err = regexp.Compile(*stressShape); err != nil {
			t.Fatal(err)
		}
	}
	for _, sh := range shapes() {
		if *stressRuns > 1 && (!sh.stress || shapeRE != nil && !shapeRE.MatchString(sh.name)) {
			continue
		}
		all = append(all, sh)
		n := 1
		if sh.stress {
			n = *stressRuns
		}
		first := map[string]verdict{}
		firstMismatches := map[string][]string{}
		var rep audit.Report
		for i := range n {
			r, err := audit.NewRunner(append(sh.opts(), audit.Parallel(*shapesParallel))...)
			if err != nil {
				t.Fatal(err)
			}
			rep = r.Run(context.Background(), scenarios)
			runs += len(rep.Results)
			for _, res := range rep.Results {
				v := verdictOf(res)
				if i == 0 {
					first[res.Name], firstMismatches[res.Name] = v, res.Mismatches
					continue
				}
				if v != first[res.Name] {
					flips++
					t.Errorf("%s: %s flipped on run %d: %+v, first %+v\n  mismatches: %q\n  first: %q",
						sh.name, res.Name, i+1, v, first[res.Name], res.Mismatches, firstMismatches[res.Name])
				}
			}
			if n > 1 && (i+1)%10 == 0 {
				fmt.Fprintf(os.Stderr, "stress: %s: %d of %d runs, %d flips so far, %s\n",
					sh.name, i+1, n, flips, time.Since(start).Round(time.Second))
			}
		}
		reports = append(reports, rep)
	}
	if *stressRuns > 1 {
		stressShapes := len(all)
		t.Logf("stress: %d scenarios × %d shapes × %d runs = %d scenario runs, %d verdict flips, in %s",
			len(scenarios), stressShapes, *stressRuns, runs, flips, time.Since(start).Round(time.Second))
		fmt.Fprintf(os.Stderr, "stress: %d scenarios × %d shapes × %d runs = %d scenario runs, %d verdict flips, in %s\n",
			len(scenarios), stressShapes, *stressRuns, runs, flips, time.Since(start).Round(time.Second))
	}

	// Every failure names its fix, and a failure that rests on reuse the
	// setting that kept the connection from it; no line of a report is
	// wider than 100.
	for i, rep := range reports {
		for _, res := range rep.Results {
			if !res.Pass && res.Skipped == "" && res.Fix == "" {
				t.Errorf("%s: %s failed with no fix: %q", all[i].name, res.Name, res.Mismatches)
			}
			if all[i].keeps != "" && res.Pass && reuseCheck(res) && (res.Proto == audit.HTTP1 || all[i].singleUse) {
				t.Errorf("%s: %s passed its reuse check, on a transport that keeps no connection for it (observed %s)",
					all[i].name, res.Name, res.Observed.Fate)
			}
			if f := res.Expected.Fate; all[i].singleUse && f != nil && f.Reason == pool.ReasonRequestError && res.Observed.Class != httptrace.ClassOK &&
				res.Observed.Fate.Reason == pool.ReasonKeepAlivesOff {
				t.Errorf("%s: %s: a connection whose request failed put down to keep-alives, which close it the same "+
					"with them on: %s", all[i].name, res.Name, res.Observed.Fate)
			}
			if all[i].singleUse && res.Observed.Fate.Reason == pool.ReasonServerGoAway {
				t.Errorf("%s: %s: closed by the server's GOAWAY, which the client's single-use close does not wait for: %s",
					all[i].name, res.Name, res.Observed.Fate)
			}
			wrong := strings.Contains(res.Fix, "in the retry layer") || strings.Contains(res.Fix, "no transport setting explains")
			if keeps := all[i].keeps; keeps != "" && restsOnReuse(res) && (!strings.Contains(res.Fix, keeps) || wrong) {
				t.Errorf("%s: %s: the fix does not name the setting (%q) alone: %q\n  mismatches: %q",
					all[i].name, res.Name, keeps, res.Fix, res.Mismatches)
			}
		}
		var b bytes.Buffer
		if err := rep.WriteText(&b, false); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if n := len([]rune(l)); n > 100 {
				t.Errorf("%s: a line of %d columns:\n%s", all[i].name, n, l)
			}
		}
	}
	if *stressRuns > 1 {
		return // the documents cover every shape; the stress set is a part
	}
	doc := shapesDoc(all, reports)
	readme := readmeTable(all, reports)
	checkGenerated(t, "../docs/shapes.md", "", "", doc)
	checkGenerated(t, "../README.md", "<!-- shapes: begin -->\n", "<!-- shapes: end -->\n", readme)
	checkGenerated(t, "../docs/catalogue.md", "<!-- catalogue: begin -->\n", "<!-- catalogue: end -->\n",
		catalogueTable(scenarios, reports[0]))
}

// reuseCheck reports whether res is a scenario whose one path ends with
// its connection reused after a request that succeeded: ok, status-*,
// trickle-body and their like.
func reuseCheck(res audit.Result) bool {
	e := res.Expected
	return res.Contract == "" && e.Or == nil && e.Class == httptrace.ClassOK && e.Fate != nil && e.Fate.Reused
}

// restsOnReuse reports whether res failed on what only a reused
// connection shows: a dial more than expected, a hidden retry or a request
// sent on a stale connection, or a connection the client closed for a
// setting (keep-alives off, its idle timeout) where one was expected
// otherwise.
func restsOnReuse(res audit.Result) bool {
	for _, m := range res.Mismatches {
		if res.Contract != "" {
			m = strings.TrimPrefix(m, res.Contract+": ")
		}
		for _, p := range []string{"dials:", "expected a hidden transport retry", "requests sent on a connection the server was closing"} {
			if strings.HasPrefix(m, p) {
				return true
			}
		}
		if strings.HasPrefix(m, "connection fate:") && (strings.HasSuffix(m, "observed closed by client (keep-alives-disabled)") ||
			strings.HasSuffix(m, "observed closed by client (idle-timeout)")) {
			return true
		}
	}
	return false
}

// checkGenerated compares the part of the file at path between the
// markers begin and end (the whole file if they are "") with want, or
// rewrites it with -update.
func checkGenerated(t *testing.T, path, begin, end, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !(*update && begin == "") {
		t.Fatal(err)
	}
	old := string(b)
	pre, post := "", ""
	if begin != "" {
		i, j := strings.Index(old, begin), strings.Index(old, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q … %q section", path, strings.TrimSpace(begin), strings.TrimSpace(end))
		}
		pre, post = old[:i+len(begin)], old[j:]
		old = old[i+len(begin) : j]
	}
	if old == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(pre+want+post), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale (a verdict changed, or the table did not follow the catalogue): "+
		"go test ./audit -run TestTransportShapes -update rewrites it; it should read:\n%s", path, want)
}

// settings are the settings a fix names, in the order the README lists
// them, with how it writes them.
var settings = []struct{ in, as string }{
	{"ForceAttemptHTTP2", "`ForceAttemptHTTP2: true`"},
	{"net.Dialer", "a `net.Dialer` `Timeout`"},
	{"TLSHandshakeTimeout", "`TLSHandshakeTimeout`"},
	{"ResponseHeaderTimeout", "`ResponseHeaderTimeout`"},
	{"pool.BodyIdleTimeout", "`pool.BodyIdleTimeout(d)`"},
	{"IdleConnTimeout", "`IdleConnTimeout`"},
	{"HTTP2Config", "`Transport.HTTP2`'s `SendPingTimeout`"},
	{"DisableKeepAlives", "no `DisableKeepAlives`"},
	{"MaxIdleConnsPerHost", "`MaxIdleConnsPerHost`"},
	{"audit.GuardDeadline", "`audit.GuardDeadline(d)` to wait for a longer bound"},
}

// fixesOf lists the settings the fixes of rep's failures and findings
// name.
func fixesOf(rep audit.Report) []string {
	var text []string
	for _, res := range rep.Results {
		if !res.Pass && res.Skipped == "" {
			text = append(text, res.Fix)
		}
	}
	for _, f := range rep.Findings {
		if _, fix, ok := strings.Cut(f, "; fix: "); ok {
			text = append(text, fix)
		}
	}
	all := strings.Join(text, "\n")
	var out []string
	for _, s := range settings {
		if strings.Contains(all, s.in) {
			out = append(out, s.as)
		}
	}
	return out
}

// failedNames lists the scenarios rep failed, those that failed the same
// way over both protocols once, as "stall-mid-body (and h2/)".
func failedNames(rep audit.Report) []string {
	var names []string
	for _, res := range rep.Results {
		if !res.Pass && res.Skipped == "" {
			names = append(names, res.Name)
		}
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "h2/") && slices.Contains(names, strings.TrimPrefix(n, "h2/")) {
			continue
		}
		if slices.Contains(names, "h2/"+n) {
			n += " (and h2/)"
		}
		out = append(out, n)
	}
	return out
}

func counts(rep audit.Report) string {
	return fmt.Sprintf("%d / %d / %d", rep.Passed, rep.Failed, rep.Skipped)
}

// readmeTable is the README's table of common transports.
func readmeTable(all []shape, reports []audit.Report) string {
	var b strings.Builder
	b.WriteString("| transport | passed / failed / skipped | fails | the fix |\n|---|---|---|---|\n")
	for i, sh := range all {
		if !sh.readme {
			continue
		}
		rep := reports[i]
		fails := strings.Join(failedNames(rep), ", ")
		if len(rep.Findings) > 0 {
			fails = strings.TrimPrefix(fails+", finding: HTTP/2 not spoken", ", ")
		}
		fix := strings.Join(fixesOf(rep), ", ")
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(sh.name), counts(rep), orNone(fails), orNone(fix))
	}
	return b.String()
}

// catalogueTable is docs/catalogue.md's table: each scenario's fault, its
// reference bound and steps, what it expects, and what the reference pool
// did, from rep, the reference pool's run.
func catalogueTable(scenarios []audit.Scenario, rep audit.Report) string {
	var b strings.Builder
	b.WriteString("| scenario | fault on the server | client bound | steps | expected | observed | stage | client/server | dials | connection after | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	outcome := func(c httptrace.Class, status int) string {
		if c == httptrace.ClassOK {
			return fmt.Sprintf("ok(%d)", status)
		}
		return string(c)
	}
	for i, s := range scenarios {
		res := rep.Results[i]
		name := s.Name
		if s.Contract != "" {
			name += " (" + s.Contract + ")"
		}
		steps := string(s.Steps)
		if s.Request.Method != "" && s.Request.Method != http.MethodGet {
			steps += ", " + s.Request.Method
		}
		expected := outcome(s.Expect.Class, s.Expect.Status)
		if or := s.Expect.Or; or != nil {
			expected += " or " + outcome(or.Class, or.Status)
		}
		o := res.Observed
		if res.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | - | - | - | - | - | SKIP: %s |\n", name, s.Fault, s.Bound, steps,
				expected, res.Skipped)
			continue
		}
		sent := fmt.Sprintf("%d/%d", o.ClientAttempts, o.ServerRequests)
		if o.HiddenRetry {
			sent += " hidden retry"
		}
		stage := string(o.Stage)
		if stage == "" {
			stage = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", name, s.Fault, s.Bound, steps,
			expected, outcome(o.Class, o.Status), stage, sent, o.Dials, o.Fate, verdictOf(res).result)
	}
	return b.String()
}

// shapesDoc is docs/shapes.md: every shape's verdict on every scenario,
// then each shape's failures and their fixes.
func shapesDoc(all []shape, reports []audit.Report) string {
	var b strings.Builder
	b.WriteString("# Common transports against the catalogue\n\n")
	b.WriteString("Generated by `go test ./audit -run TestTransportShapes -update`, which fails when this file is\n")
	b.WriteString("stale. The shapes marked (stress) are the stress set: `go test ./audit -run TestTransportShapes\n")
	b.WriteString("-args -stress=200` runs each 200 times and fails on any verdict that flips ([reliability](reliability.md)).\n\n")
	for i, sh := range all {
		stress := ""
		if sh.stress {
			stress = " (stress)"
		}
		fmt.Fprintf(&b, "%d. **%s**%s: `%s`\n", i+1, sh.name, stress, sh.code)
	}
	b.WriteString("\n| scenario |")
	for i := range all {
		fmt.Fprintf(&b, " %d |", i+1)
	}
	b.WriteString("\n|---|")
	for range all {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for j, res := range reports[0].Results {
		fmt.Fprintf(&b, "| %s |", res.Name)
		for i := range all {
			fmt.Fprintf(&b, " %s |", verdictOf(reports[i].Results[j]).result)
		}
		b.WriteString("\n")
	}
	for i, sh := range all {
		rep := reports[i]
		fmt.Fprintf(&b, "\n## %d. %s\n\n%d passed, %d failed, %d skipped.\n", i+1, sh.name, rep.Passed, rep.Failed, rep.Skipped)
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "\n- **finding**: %s\n", f)
		}
		skips := map[string][]string{}
		var reasons []string
		for _, res := range rep.Results {
			if res.Skipped != "" {
				if _, ok := skips[res.Skipped]; !ok {
					reasons = append(reasons, res.Skipped)
				}
				skips[res.Skipped] = append(skips[res.Skipped], res.Name)
			}
		}
		for _, r := range reasons {
			fmt.Fprintf(&b, "\n- skipped (%d): %s\n", len(skips[r]), r)
		}
		for _, res := range rep.Results {
			if res.Pass || res.Skipped != "" {
				continue
			}
			fmt.Fprintf(&b, "\n- **%s**: %s\n  - fix: %s\n", res.Name, anyPort.ReplaceAllString(strings.Join(res.Mismatches, "; "), "127.0.0.1:PORT"), res.Fix)
		}
	}
	return b.String()
}

// anyPort matches the fault server's loopback address, whose port differs
// from run to run.
var anyPort = regexp.MustCompile(`127\.0\.0\.1:\d+`)

func cell(s string) string {
	if strings.HasPrefix(s, "&") || strings.HasPrefix(s, "http.") {
		return "`" + s + "`"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
