package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("trace", stderr, "[flags] URL")
	var rf requestFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "write the full timeline as JSON")
	deadline := fs.Duration("deadline", time.Minute, "bound on the whole run")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "connaudit trace: want exactly one URL")
		fs.Usage()
		return exitUsage
	}
	if *deadline <= 0 {
		fmt.Fprintf(stderr, "connaudit trace: -deadline %v must be positive\n", *deadline)
		return exitUsage
	}
	ctx, cancelRun := context.WithTimeout(ctx, *deadline)
	defer cancelRun()
	req, err := rf.request(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitUsage
	}
	if rf.insecure {
		fmt.Fprintln(stderr, "connaudit trace: warning: -k: TLS certificates are not verified")
	}
	col := &httptrace.Collector{}
	opts := append(rf.poolOptions(), pool.WithObserver(col), pool.ConnectTimeout(30*time.Second))
	// A transport of its own, with no proxy: the connection traced is
	// the target's, never a proxy's.
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second, MaxResponseHeaderBytes: 1 << 20}
	p, err := pool.Track(tr, opts...)
	if err != nil {
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
	var notH2 string // why -http2 was not met
	if err == nil {
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
			io.Copy(io.Discard, io.LimitReader(resp.Body, rf.maxBody))
		}
		resp.Body.Close()
	}
	tls := col.Timelines()
	if len(tls) == 0 {
		fmt.Fprintf(stderr, "connaudit trace: %s\n", rf.redact(err, req))
		return exitFail
	}
	tl := tls[len(tls)-1]
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(tl); err != nil {
			fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
			return exitFail
		}
	} else if err := tl.WriteText(stdout, true); err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitFail
	}
	if err != nil {
		// The Client's own errors (a bad Location header) come after a
		// timeline that may be ok.
		msg := rf.redact(err, req)
		if strings.Contains(msg, "failed to parse Location header") {
			// net/http quotes the header, which the server wrote and may
			// have filled with credentials of its own.
			msg = "the response's Location header does not parse"
		}
		fmt.Fprintf(stderr, "connaudit trace: %s\n", msg)
		return exitFail
	}
	if notH2 != "" {
		fmt.Fprintf(stderr, "connaudit trace: -http2: h2-not-offered: %s\n", notH2)
		return exitFail
	}
	if tl.Outcome.Class != vocab.ClassOK {
		return exitFail
	}
	return exitOK
}

// defaultTimeout bounds one request of trace and probe.
const defaultTimeout = 30 * time.Second
