package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/connaudit/connaudit/httptrace"
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
	opts := append(rf.poolOptions(), pool.WithObserver(col))
	p, err := pool.New(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitUsage
	}
	defer p.Close()
	rctx, cancel := context.WithTimeout(req.Context(), rf.timeout)
	defer cancel()
	resp, err := p.Client().Do(req.WithContext(rctx))
	if err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, rf.maxBody))
		resp.Body.Close()
	}
	tls := col.Timelines()
	if len(tls) == 0 {
		fmt.Fprintf(stderr, "connaudit trace: %s\n", httptrace.RedactError(err, req.URL))
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
	} else if err := httptrace.WriteWaterfall(stdout, tl); err != nil {
		fmt.Fprintf(stderr, "connaudit trace: %v\n", err)
		return exitFail
	}
	if tl.Outcome.Class != httptrace.ClassOK {
		return exitFail
	}
	return exitOK
}

// defaultTimeout bounds one request of trace and probe.
const defaultTimeout = 30 * time.Second
