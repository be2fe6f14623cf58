package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

// traceFlags are trace's own flags, beside the shared request flags.
type traceFlags struct {
	asJSON, fail bool
	deadline     time.Duration
	pics         pictureFlags
}

// newTraceFlags returns trace's flag set and the flags it sets.
func newTraceFlags(stdout, stderr io.Writer) (*flagSet, *requestFlags, *traceFlags) {
	fs := newFlagSet("trace", stdout, stderr, "[flags] URL")
	var (
		rf requestFlags
		tf traceFlags
	)
	rf.register(fs.FlagSet)
	fs.BoolVar(&tf.asJSON, "json", false, "write the full timeline as JSON")
	fs.DurationVar(&tf.deadline, "deadline", time.Minute, "bound on the whole run")
	fs.BoolVar(&tf.fail, "fail", false, "exit 1 when the response's status is 400 or more (as curl -f)")
	tf.pics.register(fs.FlagSet, true)
	return fs, &rf, &tf
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, rf, tf := newTraceFlags(stdout, stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("want exactly one URL, got %d arguments", fs.NArg())
	}
	if tf.deadline <= 0 {
		fmt.Fprintf(stderr, "connaudit trace: -deadline %v must be positive\n", tf.deadline)
		return exitUsage
	}
	interrupt := ctx // a signal's, apart from -deadline
	ctx, cancelRun := context.WithTimeout(ctx, tf.deadline)
	defer cancelRun()
	req, err := rf.request(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitUsage
	}
	if err := tf.pics.open(); err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitUsage
	}
	if rf.insecure {
		rf.warn(stderr, "connaudit trace: warning: -k: TLS certificates are not verified")
	}
	col := &httptrace.Collector{}
	opts := append(rf.poolOptions(), pool.WithObserver(col), pool.ConnectTimeout(30*time.Second))
	// A transport of its own, with no proxy: the connection traced is
	// the target's, never a proxy's.
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second, MaxResponseHeaderBytes: 1 << 20}
	p, err := pool.Track(tr, opts...)
	if err != nil {
		tf.pics.discard()
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitUsage
	}
	defer p.Close()
	rctx, cancel := context.WithTimeout(req.Context(), rf.timeout)
	defer cancel()
	client := &http.Client{
		Transport: p.RoundTripper(),
		// Never follow a redirect: trace traces one request, and the
		// Client would send the next one with this one's URL, query
		// included, as its Referer. The 3xx response is the result.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req.WithContext(rctx))
	var (
		notH2   string      // why -http2 was not met
		bodyErr error       // reading the body
		cut     bool        // -max-body stopped the read before the body's end
		header  http.Header // the response's
	)
	if err == nil {
		header = resp.Header
		if rf.http2 && resp.ProtoMajor != 2 {
			alpn := "none"
			if resp.TLS != nil && resp.TLS.NegotiatedProtocol != "" {
				alpn = resp.TLS.NegotiatedProtocol
			}
			notH2 = "the server did not select HTTP/2 over TLS (ALPN: " + alpn + ")"
		}
		// A 101 response's body is the connection, handed over to the
		// protocol switched to: reading it waits for what the server
		// sends next, and no timeout or context bounds that wait. It is
		// closed unread.
		if resp.StatusCode != http.StatusSwitchingProtocols {
			var n int64
			n, bodyErr = io.Copy(io.Discard, io.LimitReader(resp.Body, rf.maxBody))
			if bodyErr == nil && n == rf.maxBody {
				// The limit reached: one byte more says whether the body
				// went on.
				var one [1]byte
				k, _ := io.ReadFull(resp.Body, one[:])
				cut = k == 1
			}
		}
		resp.Body.Close()
	}
	tls := col.Timelines()
	if len(tls) == 0 {
		msg := rf.redact(err, req)
		if msg == "" {
			msg = "no timeline was recorded"
		}
		fmt.Fprintf(stderr, "connaudit trace: %s\n", msg)
		tf.pics.discard()
		return exitFail
	}
	tl := tls[len(tls)-1]
	if err := tf.pics.finish(pictures.Trace(tl)); err != nil {
		fmt.Fprintf(stderr, "connaudit trace: writing the picture: %v\n", err)
		return exitFail
	}
	if tf.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(tl); err != nil {
			fmt.Fprintf(stderr, "connaudit trace: writing the timeline: %v\n", err)
			return exitFail
		}
	} else if err := writeTraceText(stdout, tl, header, req, rf); err != nil {
		fmt.Fprintf(stderr, "connaudit trace: writing the timeline: %v\n", err)
		return exitFail
	}
	return traceExit(stderr, traceResult{
		tl: tl, err: err, bodyErr: bodyErr, cut: cut, req: req, rf: rf, notH2: notH2,
		interrupted: interrupt.Err() != nil, failHTTP: tf.fail,
	})
}

// writeTraceText writes the timeline, then the response's header, as
// httpstat shows it: a line per value, sorted by name, each fitted to 100
// columns, with every secret masked — whole, the values of a header named
// for a credential or a secret (Set-Cookie, Authorization, X-Auth-Token,
// X-Api-Key: [redact.SecretHeader]) or as a -H header; anywhere in a
// value, the request's secrets a server may echo, and the server's own in
// the forms that carry one (a URL's user information and query values, a
// Bearer token, name=value after a secret's name: [redact.Text]).
func writeTraceText(w io.Writer, tl *httptrace.Timeline, header http.Header, req *http.Request, rf *requestFlags) error {
	var b strings.Builder
	if err := tl.WriteText(&b, true); err != nil {
		return err
	}
	if len(header) > 0 {
		secret := rf.secretHeaders()
		more := redact.RequestSecrets(req, secret)
		b.WriteString("  response header\n")
		for _, name := range slices.Sorted(maps.Keys(header)) {
			for _, v := range header[name] {
				if redact.SecretHeader(name) || slices.ContainsFunc(secret, func(s string) bool { return strings.EqualFold(s, name) }) {
					v = redact.Masked
				}
				line := "    " + redact.Printable(name) + ": " + redact.Text(redact.Mask(v, req.URL, more))
				b.WriteString(text.Cut(line, traceWidth) + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// traceWidth is the width trace's lines of the response header fit.
const traceWidth = 100

// traceResult is what trace's exit code and stderr lines depend on.
type traceResult struct {
	tl           *httptrace.Timeline
	err, bodyErr error // the Client's, reading the body's
	cut          bool  // -max-body stopped the read before the body's end
	req          *http.Request
	rf           *requestFlags
	notH2        string // why -http2 was not met
	interrupted  bool   // the run's context ended (a signal)
	failHTTP     bool   // -fail
}

// traceExit writes a line on stderr for each failure of r and returns the
// exit code: 3 when no response came, 1 for any other failure, else 0.
func traceExit(stderr io.Writer, r traceResult) int {
	code := exitOK
	prefix := "" // an interrupt is said once, with the failure it caused
	if r.interrupted {
		prefix, code = "interrupted: ", exitFail
	}
	failed := func(c int, format string, args ...any) {
		fmt.Fprintf(stderr, "connaudit trace: "+prefix+format+"\n", args...)
		prefix = ""
		code = max(code, c)
	}
	tl := r.tl
	switch {
	case r.err != nil:
		// The request failed, or the Client's own checks (a bad
		// Location header) failed after a timeline that may be ok.
		msg := r.rf.redact(r.err, r.req)
		if strings.Contains(msg, "failed to parse Location header") {
			// net/http quotes the header, which the server wrote and may
			// have filled with credentials of its own.
			msg = "the response's Location header does not parse"
		}
		c := exitFail
		if tl.Status == 0 && !r.interrupted {
			c = exitUnreachable
		}
		failed(c, "%s", msg)
	case tl.Outcome.Class != vocab.ClassOK:
		// The response came; its body failed.
		msg := string(tl.Outcome.Class) + " @" + string(tl.Outcome.Stage)
		if e := tl.Outcome.Err; e != nil {
			msg += ": " + tl.RedactError(e)
		} else if r.bodyErr != nil {
			msg += ": " + r.rf.redact(r.bodyErr, r.req)
		}
		failed(exitFail, "reading the response's body: %s", msg)
	case r.bodyErr != nil:
		failed(exitFail, "reading the response's body: %s", r.rf.redact(r.bodyErr, r.req))
	case r.cut:
		// A body cut short, though by the user's own bound: the response
		// traced is not the whole of it (as curl's --max-filesize fails).
		failed(exitFail, "reading the response's body: stopped at -max-body %d bytes, before its end", r.rf.maxBody)
	}
	if r.notH2 != "" {
		failed(exitFail, "-http2: h2-not-offered: %s", r.notH2)
	}
	if r.failHTTP && tl.Status >= 400 {
		failed(exitFail, "-fail: the server answered %d %s", tl.Status, http.StatusText(tl.Status))
	}
	if prefix != "" {
		fmt.Fprintln(stderr, "connaudit trace: interrupted")
	}
	return code
}

// defaultTimeout bounds one request of trace and probe.
const defaultTimeout = 30 * time.Second
