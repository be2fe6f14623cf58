package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/picture"
	"github.com/connaudit/connaudit/internal/pictures"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/proxy"
)

// ruleFlags collects each -fault.
type ruleFlags []string

func (r *ruleFlags) String() string     { return strings.Join(*r, "; ") }
func (r *ruleFlags) Set(s string) error { *r = append(*r, s); return nil }

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("proxy", stdout, stderr, "-upstream URL [-listen ADDR] [-tls [-ca FILE]] [-upstream-ca FILE]\n"+
		"                       [-fault RULE]… [-faults FILE] [-seed N] [-client-header NAME] [-guard D]\n"+
		"                       [-upstream-idle D] [-replay-window D] [-duration D] [-json] [-junit FILE]\n"+
		"                       [-html FILE] [-debug ADDR]")
	listen := fs.String("listen", "127.0.0.1:0", "the address the client under test is pointed at")
	upstream := fs.String("upstream", "", "the upstream's URL (http or https; without a scheme, http)")
	upstreamCA := fs.String("upstream-ca", "", "verify an HTTPS upstream against this CA file alone")
	useTLS := fs.Bool("tls", false, "speak TLS to the client (HTTP/2 or HTTP/1.1), with a CA of the proxy's own")
	caPath := fs.String("ca", "", "with -tls, write the proxy's CA certificate here (default: a temporary file)")
	var faults ruleFlags
	fs.Var(&faults, "fault", "a fault rule (repeatable; docs/proxy.md), such as 'reset nth=3'")
	faultsFile := fs.String("faults", "", "read fault rules from this file, one a line")
	seed := fs.Uint64("seed", 0, "the seed of the rules' shares: runs with one seed reproduce")
	clientHeader := fs.String("client-header", "", "tell clients apart by this request header (default: source IP)")
	guard := fs.Duration("guard", 0, "cut a request held this long and judge it unbounded (0: none)")
	upstreamIdle := fs.Duration("upstream-idle", 0, "the upstream's keep-alive idle timeout (default: as the run sees it)")
	window := fs.Duration("replay-window", 5*time.Second, "a request seen again within this is a replay")
	duration := fs.Duration("duration", 0, "stop after this long (0: at an interrupt)")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	junitFile := fs.String("junit", "", "also write the verdicts as JUnit XML to this file")
	var pics pictureFlags
	pics.register(fs.FlagSet, false)
	debugAddr := fs.String("debug", "", "serve the upstream pool's debug page (JSON, ?format=text, ?format=html) at\n"+
		"http://ADDR/debug/connpool during the run; on loopback unless ADDR names a host\n"+
		"(\":6060\" is 127.0.0.1:6060)")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return fs.usageError("unexpected argument %q", redact.URLString(fs.Arg(0)))
	}
	if *upstream == "" {
		return fs.usageError("-upstream URL is required")
	}
	if *duration < 0 || *guard < 0 || *upstreamIdle < 0 || *window <= 0 {
		return fs.usageError("-duration, -guard and -upstream-idle must not be negative, -replay-window positive")
	}
	if *caPath != "" && !*useTLS {
		return fs.usageError("-ca needs -tls")
	}
	opts := []proxy.Option{proxy.Listen(*listen), proxy.Seed(*seed), proxy.ReplayWindow(*window)}
	var rules []proxy.Rule
	for _, s := range faults {
		r, err := proxy.ParseRule(s)
		if err != nil {
			return fs.usageError("-fault: %v", err)
		}
		rules = append(rules, r)
	}
	if *faultsFile != "" {
		f, err := os.Open(*faultsFile)
		if err != nil {
			return fs.usageError("-faults: %v", err)
		}
		rs, err := proxy.ParseRules(f)
		f.Close()
		if err != nil {
			return fs.usageError("-faults %s: %v", *faultsFile, err)
		}
		rules = append(rules, rs...)
	}
	if len(rules) > 0 {
		opts = append(opts, proxy.Faults(rules...))
	}
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			return fs.usageError("-upstream-ca: %v", err)
		}
		opts = append(opts, proxy.UpstreamCA(pem))
	}
	if *useTLS {
		opts = append(opts, proxy.DownstreamTLS())
	}
	if *clientHeader != "" {
		opts = append(opts, proxy.ClientHeader(*clientHeader))
	}
	if *guard > 0 {
		opts = append(opts, proxy.Guard(*guard))
	}
	if *upstreamIdle > 0 {
		opts = append(opts, proxy.UpstreamIdle(*upstreamIdle))
	}
	var junit *outputFile
	if *junitFile != "" {
		var err error
		if junit, err = openOutput(*junitFile); err != nil {
			return fs.usageError("-junit: %v", err)
		}
		defer func() { // unless written: junit is nil then
			if junit != nil {
				junit.discard()
			}
		}()
	}
	if err := pics.open(); err != nil {
		return fs.usageError("%v", err)
	}
	picsDone := false
	defer func() { // unless written
		if !picsDone {
			pics.discard()
		}
	}()
	// As probe and trace take it: a URL without a scheme is an http one.
	p, err := proxy.New(withScheme(*upstream), opts...)
	if err != nil {
		return fs.usageError("%v", err)
	}
	var debugLn net.Listener
	if *debugAddr != "" {
		if debugLn, err = listenLoopback(*debugAddr); err != nil {
			p.Close()
			return fs.usageError("-debug: %v", err)
		}
		defer debugLn.Close()
	}
	if err := p.Start(); err != nil {
		return fs.usageError("%v", err)
	}
	defer p.Close()
	ca := ""
	if *useTLS {
		ca = *caPath
		if ca == "" {
			dir, err := os.MkdirTemp("", "connaudit-proxy-")
			if err != nil {
				fmt.Fprintf(stderr, "connaudit proxy: %v\n", err)
				return exitFail
			}
			defer os.RemoveAll(dir)
			ca = filepath.Join(dir, "ca.pem")
		}
		if err := os.WriteFile(ca, p.CA(), 0o644); err != nil {
			return fs.usageError("-ca: %v", err)
		}
		ca = " CA=" + ca
	}
	fmt.Fprintf(stderr, "connaudit proxy: %s → %s%s (interrupt to stop)\n", p.URL(), redact.URLString(withScheme(*upstream)), ca)
	if debugLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/debug/connpool", p.UpstreamPool().Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ErrorLog: log.New(io.Discard, "", 0)}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(debugLn) }()
		defer func() { srv.Close(); <-served }()
		fmt.Fprintf(stderr, "connaudit proxy: the upstream pool's debug page: http://%s/debug/connpool\n", debugLn.Addr())
	}
	liveLines(ctx, p, *duration, stderr)
	p.Close()
	rep := p.Report()
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err == nil && junit != nil {
		err = junit.write(rep.WriteJUnit)
		junit = nil
	}
	if err == nil {
		picsDone = true
		err = pics.finish(picture.Page{Title: "connaudit proxy", Sets: pictures.Proxy(rep)})
	}
	if err != nil {
		fmt.Fprintf(stderr, "connaudit proxy: writing the report: %v\n", err)
		return exitFail
	}
	if rep.Failed() {
		return exitFail
	}
	return exitOK
}

// liveLines writes the live line to stderr, at most once a second and
// only when it changed, until ctx ends or d (if not 0) passes.
func liveLines(ctx context.Context, p *proxy.Proxy, d time.Duration, stderr io.Writer) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if line, v := p.Live(); v != last {
				last = v
				fmt.Fprintln(stderr, line)
			}
		}
	}
}

// listenLoopback listens on addr, on 127.0.0.1 unless addr names a host:
// ":6060" and "6060" are 127.0.0.1:6060.
func listenLoopback(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}
