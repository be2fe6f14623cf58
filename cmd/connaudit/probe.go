package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/probe"
)

// The probe flags' defaults and bounds. -n's and -client-idle's defaults,
// and the bound on -n and -max-requests, are the probe's own
// (TestProbeFlagDefaults).
const (
	defaultProbeRequests = 20
	defaultClientIdle    = 90 * time.Second
	defaultMaxRequests   = 1000
	defaultMaxIdle       = 30 * time.Second
	maxProbeRequests     = 1_000_000
)

// probeFlags are probe's own flags, beside the shared request flags.
type probeFlags struct {
	n, c, conns      int
	gap, deadline    time.Duration
	clientIdle       time.Duration
	asJSON, verbose  bool
	out, failOn      string
	cacert           string
	findMaxRequests  bool
	maxRequests      int
	findIdleTimeout  bool
	maxIdle          time.Duration
	failLevel        probe.Severity
	failOnNeverFails bool
	duration         time.Duration
}

func (pf *probeFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&pf.n, "n", defaultProbeRequests, "number of requests to send (1 to 1000000)")
	fs.IntVar(&pf.c, "c", 1, "requests in flight at once (at most -n); past -conns they wait for a connection")
	pf.conns = connsUnset
	fs.Var((*connsFlag)(&pf.conns), "conns", "cap on connections to the host, an `int` (MaxConnsPerHost; 0: no cap); by default\n"+
		"-c: a connection per worker, as hey has")
	fs.DurationVar(&pf.gap, "gap", 0, "pause between one worker's requests")
	fs.DurationVar(&pf.deadline, "deadline", 5*time.Minute, "bound on the whole probe, discovery included")
	fs.DurationVar(&pf.clientIdle, "client-idle", defaultClientIdle, "your client's IdleConnTimeout, to compare with the server's idle timeout")
	fs.BoolVar(&pf.asJSON, "json", false, "write the report as JSON (schema connaudit.probe/v1)")
	fs.BoolVar(&pf.verbose, "v", false, "also stream each request's waterfall (-json: a JSON line each, then the report)")
	fs.StringVar(&pf.out, "o", "", "write the report to this file instead of stdout")
	fs.StringVar(&pf.failOn, "fail-on", "error", "exit 1 on a finding at or above this severity: info, warn, error or none")
	fs.StringVar(&pf.cacert, "cacert", "", "PEM file of CA certificates to trust instead of the system's")
	fs.BoolVar(&pf.findMaxRequests, "find-max-requests", false, "discover the server's requests-per-connection limit")
	fs.IntVar(&pf.maxRequests, "max-requests", defaultMaxRequests, "most requests -find-max-requests sends")
	fs.BoolVar(&pf.findIdleTimeout, "find-idle-timeout", false, "discover the server's keep-alive idle timeout")
	fs.DurationVar(&pf.maxIdle, "max-idle", defaultMaxIdle, "longest idle gap -find-idle-timeout tries")
	fs.DurationVar(&pf.duration, "duration", 0, "send requests for this long instead of -n of them (at least one; at most -n if given)")
}

// connsUnset is -conns before the flags are read: not given, it is -c.
const connsUnset = -1

// connsFlag is -conns: an int whose default, -c, is no number of its own,
// so that -h shows none.
type connsFlag int

func (c *connsFlag) String() string {
	if c == nil || *c <= 0 {
		return ""
	}
	return strconv.Itoa(int(*c))
}

func (c *connsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("parse error")
	}
	*c = connsFlag(n)
	return nil
}

// validate checks the values the flag package cannot, with one message
// naming the flag.
func (pf *probeFlags) validate() error {
	switch {
	case pf.n < 1 || pf.n > maxProbeRequests:
		return fmt.Errorf("-n %d: want 1 to %d", pf.n, maxProbeRequests)
	case pf.c < 1:
		return fmt.Errorf("-c %d: want at least 1", pf.c)
	case pf.c > pf.n:
		return fmt.Errorf("-c %d is more than -n %d: every worker needs a request", pf.c, pf.n)
	case pf.conns < 0:
		return fmt.Errorf("-conns %d: want 0 (no cap) or more", pf.conns)
	case pf.gap < 0:
		return fmt.Errorf("-gap %v: must not be negative", pf.gap)
	case pf.deadline <= 0:
		return fmt.Errorf("-deadline %v: must be positive", pf.deadline)
	case pf.clientIdle <= 0:
		return fmt.Errorf("-client-idle %v: must be positive", pf.clientIdle)
	case pf.maxRequests < 2 || pf.maxRequests > maxProbeRequests:
		return fmt.Errorf("-max-requests %d: want 2 to %d", pf.maxRequests, maxProbeRequests)
	case pf.maxIdle <= 0:
		return fmt.Errorf("-max-idle %v: must be positive", pf.maxIdle)
	case pf.duration < 0:
		return fmt.Errorf("-duration %v: must not be negative", pf.duration)
	}
	switch pf.failOn {
	case "none":
		pf.failOnNeverFails = true
	case "info", "warn", "error":
		pf.failLevel = probe.Severity(pf.failOn)
	default:
		return fmt.Errorf("-fail-on %q: want info, warn, error or none", pf.failOn)
	}
	return nil
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("probe", stdout, stderr, "[flags] URL")
	var (
		rf   requestFlags
		pf   probeFlags
		pics pictureFlags
	)
	rf.register(fs.FlagSet)
	pf.register(fs.FlagSet)
	pics.register(fs.FlagSet, true)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if pf.duration > 0 && !given(fs.FlagSet, "n") {
		// -duration bounds the run; -n, when given, bounds its requests.
		pf.n = maxProbeRequests
	}
	if !given(fs.FlagSet, "conns") {
		// A connection per worker, as hey: -c 4 alone is four workers on
		// four connections, not four queued on one.
		pf.conns = pf.c
	}
	if pf.duration > 0 && !given(fs.FlagSet, "deadline") {
		// The default deadline bounds what comes after the run's time.
		pf.deadline += pf.duration
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "connaudit probe: "+format+"\n", args...)
		return exitUsage
	}
	if fs.NArg() != 1 {
		return fs.usageError("want exactly one URL, got %d arguments", fs.NArg())
	}
	if err := pf.validate(); err != nil {
		return fail("%v", err)
	}
	req, err := rf.request(ctx, fs.Arg(0))
	if err != nil {
		return fail("%v", err)
	}
	opts, err := pf.options(&rf)
	if err != nil {
		return fail("%v", err)
	}
	if rf.insecure {
		rf.warn(stderr, "connaudit probe: warning: -k: TLS certificates are not verified")
	}
	var outFile *outputFile
	if pf.out != "" {
		if outFile, err = openOutput(pf.out); err != nil {
			return fail("-o: %v", err)
		}
	}
	if err := pics.open(); err != nil {
		if outFile != nil {
			outFile.discard()
		}
		return fail("%v", err)
	}
	if err := pics.stream(time.Now(), "probe "+req.Method+" "+redact.URL(req.URL)); err != nil {
		pics.discard()
		return fail("-trace-events: %v", err)
	}
	var progress *progressLine
	if !rf.silent {
		progress = newProgressLine(stderr)
	}
	var stream *timelineStream
	if pf.verbose {
		// Each timeline is written as it finishes, not kept for the end.
		w := stdout
		if outFile != nil {
			if w, err = outFile.streamTo(); err != nil {
				outFile.discard()
				return fail("-o: %v", err)
			}
		}
		stream = &timelineStream{w: w, json: pf.asJSON}
	}
	if progress != nil || stream != nil || pics.html != "" || pics.traceEvents != "" {
		opts = append(opts, probe.OnProgress(func(p probe.Progress) {
			if p.Timeline != nil {
				pics.add(p.Timeline)
				stream.write(p.Timeline)
				return
			}
			if progress != nil {
				progress.update(p)
			}
		}))
	}
	rep, err := probe.Run(ctx, req, opts...)
	progress.clear()
	var unusable *probe.UnusableError
	if err != nil && !errors.As(err, &unusable) {
		if outFile != nil {
			outFile.discard()
		}
		pics.discard()
		return fail("%s", rf.redact(err, req))
	}
	werr := stream.err()
	set := pictures.Probe(rep, pics.reqs, pics.omitted)
	if err := pics.finish(picture.Page{Title: "connaudit probe", Sets: []picture.Set{set}}); werr == nil {
		werr = err
	}
	if outFile != nil {
		if err := outFile.write(func(w io.Writer) error { return pf.write(w, rep) }); werr == nil {
			werr = err
		}
	} else if err := pf.write(stdout, rep); werr == nil {
		werr = err
	}
	if werr != nil {
		fmt.Fprintf(stderr, "connaudit probe: writing the report: %v\n", werr)
		return exitFail
	}
	return probeExit(stderr, rep, unusable, &pf, &rf, req)
}

// probeExit writes a line on stderr for each way rep failed and returns
// the exit code: 3 when no request got a response, 1 when the probe was
// cut by its deadline or interrupted or has a finding at -fail-on's level,
// else 0.
func probeExit(stderr io.Writer, rep *probe.Result, unusable *probe.UnusableError, pf *probeFlags, rf *requestFlags, req *http.Request) int {
	code := exitOK
	failed := func(c int, format string, args ...any) {
		fmt.Fprintf(stderr, "connaudit probe: "+format+"\n", args...)
		code = max(code, c)
	}
	if unusable != nil {
		// A probe whose deadline came before it sent anything learnt
		// nothing of the target: it was cut, not refused. A target that
		// answered, though every body then failed, did answer.
		c := exitUnreachable
		if unusable.Sent == 0 || responded(rep) {
			c = exitFail
		}
		failed(c, "unusable target: %s%s", rf.redact(unusable, req), hint(unusable))
	}
	switch {
	case rep.Interrupted:
		failed(exitFail, "interrupted: %d of %d requests sent; the report covers those", rep.Requests, rep.Requested)
	case rep.DeadlineReached && unusable == nil:
		failed(exitFail, "-deadline %v reached: %d of %d requests sent, %d cut by it; the report covers what was done",
			pf.deadline, rep.Requests, rep.Requested, rep.Cut)
	}
	if unusable == nil && !pf.failOnNeverFails && rep.Fails(pf.failLevel) {
		n := 0
		for _, f := range rep.Findings {
			if f.Severity.Rank() >= pf.failLevel.Rank() {
				n++
			}
		}
		failed(exitFail, "%d finding(s) at or above -fail-on %s", n, pf.failLevel)
	}
	return code
}

// responded reports whether a request of rep got a response (its head),
// whatever became of its body.
func responded(rep *probe.Result) bool {
	for _, f := range rep.Failures {
		if f.Stage == vocab.StageBody {
			return true
		}
	}
	for _, c := range rep.Connections {
		if c.Responses > 0 {
			return true
		}
	}
	return false
}

// hint suggests a flag for a failure a flag can get past.
func hint(e *probe.UnusableError) string {
	switch e.Class {
	case vocab.ClassTLS:
		return " (-cacert FILE trusts another CA; -k skips verification)"
	case vocab.ClassDeadline, vocab.ClassConnectTimeout, vocab.ClassTLSHandshakeTimeout:
		return " (see -timeout and -deadline)"
	}
	return ""
}

// options turns the flags into probe options.
func (pf *probeFlags) options(rf *requestFlags) ([]probe.Option, error) {
	opts := []probe.Option{
		probe.Requests(pf.n), probe.Concurrency(pf.c), probe.MaxConnsPerHost(pf.conns), probe.Gap(pf.gap),
		probe.Timeout(rf.timeout), probe.Deadline(pf.deadline), probe.MaxBody(rf.maxBody),
		probe.IdleConnTimeout(pf.clientIdle),
	}
	tc := &tls.Config{InsecureSkipVerify: rf.insecure} //nolint:gosec // asked for with -k, warned about
	if pf.cacert != "" {
		pem, err := readUserFile(pf.cacert, maxCACertFile)
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", pf.cacert)
		}
		tc.RootCAs = roots
	}
	opts = append(opts, probe.TLSClientConfig(tc))
	if rf.http1 || rf.http2 {
		// -http1: HTTP/1 only; -http2: HTTP/2 required (the request flags
		// reject both at once).
		var p http.Protocols
		p.SetHTTP1(rf.http1)
		p.SetHTTP2(rf.http2)
		opts = append(opts, probe.Protocols(p))
	}
	if pf.findMaxRequests {
		opts = append(opts, probe.FindMaxRequests(pf.maxRequests))
	}
	if pf.findIdleTimeout {
		opts = append(opts, probe.FindIdleTimeout(pf.maxIdle))
	}
	if pf.duration > 0 {
		opts = append(opts, probe.Duration(pf.duration))
	}
	return opts, nil
}

// write writes the report as JSON or text, the text coloured for a
// terminal. With -v and -json the report is one line, after the
// timelines' lines: the whole is JSON Lines.
func (pf *probeFlags) write(w io.Writer, rep *probe.Result) error {
	if pf.asJSON && pf.verbose {
		return json.NewEncoder(w).Encode(rep)
	}
	if pf.asJSON {
		return rep.WriteJSON(w)
	}
	return writeProbeText(w, rep, pf.verbose, useColor(w))
}

// given reports whether the flag name was given on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// timelineStream writes each finished timeline of a probe, as -v asks: its
// waterfall, or one line of JSON with -json. Calls are serialised (the
// probe's progress calls are); the first error is kept and stops the
// writing.
type timelineStream struct {
	w     io.Writer
	json  bool
	first error
}

func (s *timelineStream) write(tl *httptrace.Timeline) {
	if s == nil || s.first != nil {
		return
	}
	if s.json {
		s.first = json.NewEncoder(s.w).Encode(tl)
		return
	}
	var b strings.Builder
	if s.first = tl.WriteText(&b, true); s.first == nil {
		b.WriteByte('\n')
		_, s.first = io.WriteString(s.w, b.String())
	}
}

// err returns the first error of the writing, if any.
func (s *timelineStream) err() error {
	if s == nil {
		return nil
	}
	return s.first
}

// progressLine rewrites one line on a terminal's stderr while a probe runs
// longer than a second.
type progressLine struct {
	w       io.Writer
	last    time.Time
	printed bool
}

const (
	progressAfter = time.Second
	progressEvery = 100 * time.Millisecond
)

// newProgressLine returns a progress line for w, or nil when w is not a
// terminal.
func newProgressLine(w io.Writer) *progressLine {
	w = unescaped(w)
	if !isTerminal(w) {
		return nil
	}
	return &progressLine{w: w}
}

// update is the probe's progress callback; calls are serialised.
func (l *progressLine) update(p probe.Progress) {
	now := time.Now()
	if p.Elapsed < progressAfter || now.Sub(l.last) < progressEvery {
		return
	}
	l.last = now
	l.printed = true
	fmt.Fprintf(l.w, "\r\x1b[K%s", progressText(p))
}

// progressText says where a probe is.
func progressText(p probe.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "probe: %s", p.Phase)
	if p.Total > 0 {
		fmt.Fprintf(&b, " %d/%d", p.Done, p.Total)
	} else {
		fmt.Fprintf(&b, " %d requests", p.Done)
	}
	if p.Phase == "requests" {
		fmt.Fprintf(&b, ", %d dials", p.Dials)
	}
	if p.Idle > 0 {
		fmt.Fprintf(&b, ", idle %s", p.Idle)
	}
	fmt.Fprintf(&b, " (%s)", p.Elapsed.Round(100*time.Millisecond))
	return b.String()
}

// clear erases the line, if anything was written.
func (l *progressLine) clear() {
	if l == nil || !l.printed {
		return
	}
	fmt.Fprint(l.w, "\r\x1b[K")
}
