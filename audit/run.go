package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// Run runs scenarios and reports on all of them, in their order: up to
// [Parallel] at a time (8 unless said), or one after the other, each with
// a fault server and a pool of its own, each judged alone: what it leaves
// behind — goroutines, connections, open bodies — is its own (see
// [Runner.RunOne]). Run stops early only when ctx ends: the scenarios it
// cut and those not started by then are reported skipped ([Result.Skipped]),
// with no verdict; the report is incomplete and not OK. Scenarios over a
// protocol not meant, or that the transport cannot speak, are reported
// skipped ([Protocols]).
func (r *Runner) Run(ctx context.Context, scenarios []Scenario) Report {
	start := time.Now()
	rep := r.NewReport()
	rep.Findings = r.Findings(scenarios)
	results := make([]Result, len(scenarios))
	var mu sync.Mutex // serialises OnResult
	run := func(i int) {
		s := scenarios[i]
		if ctx.Err() != nil {
			results[i] = Result{Name: s.Name, Contract: s.Contract, Proto: s.Proto, Fault: s.Fault, Bound: s.Bound,
				Expected: s.Expect, Wait: s.Wait, Skipped: "not started: " + context.Cause(ctx).Error()}
			return
		}
		results[i] = r.RunOne(ctx, s)
		if r.progress != nil {
			mu.Lock()
			r.progress(results[i])
			mu.Unlock()
		}
	}
	if r.parallel <= 1 {
		for i := range scenarios {
			run(i)
		}
	} else {
		units := r.units(scenarios)
		work := make(chan []int)
		var wg sync.WaitGroup
		for range min(r.parallel, len(units)) {
			wg.Go(func() {
				for u := range work {
					for _, i := range u {
						run(i)
					}
				}
			})
		}
		for _, u := range units {
			work <- u
		}
		close(work)
		wg.Wait()
	}
	for _, res := range results {
		rep.Add(res)
		if strings.HasPrefix(res.Skipped, "not started: ") || strings.HasPrefix(res.Skipped, "cut: ") {
			rep.Incomplete = true
		}
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// units splits scenarios, by index, into what runs at once: each
// scenario alone, but for the contracts of a caller's retry layer, which
// may share state between the layers its configure returns, and so run
// one after the other, in their order, as one unit, unless [Parallel] was
// given. The longest units come first, so that the others run beside them.
func (r *Runner) units(scenarios []Scenario) [][]int {
	var units [][]int
	var layer []int
	for i, s := range scenarios {
		if s.Contract != "" && r.retryLayer != nil && !r.parallelSet {
			layer = append(layer, i)
			continue
		}
		units = append(units, []int{i})
	}
	if len(layer) > 0 {
		units = append(units, layer)
	}
	wait := func(u []int) time.Duration {
		var d time.Duration
		for _, i := range u {
			d += scenarios[i].Wait
		}
		return d
	}
	slices.SortStableFunc(units, func(a, b []int) int { return cmp.Compare(wait(b), wait(a)) })
	return units
}

// NewReport returns an empty report on the client this runner audits, to
// which [Report.Add] adds the results of [Runner.RunOne].
func (r *Runner) NewReport() Report {
	row := r.retryRow
	if row == "" && r.retryLayer != nil {
		row = retryConfigured
	}
	return Report{Transport: r.transportName, Protocols: r.meantText(), GoVersion: runtime.Version(), retryName: r.retryName,
		retryRow: row, Parallel: max(1, r.parallel)}
}

// Findings returns the problems of the client as a whole that running
// scenarios would meet, each with its fix: a protocol meant ([Protocols])
// that the transport cannot speak. [Runner.Run] reports them in
// [Report.Findings].
func (r *Runner) Findings(scenarios []Scenario) []string {
	sub, err := r.subject()
	if err != nil {
		return []string{err.Error() + "; fix: return a transport from the factory given to " + nameWithTransport}
	}
	return r.findings(sub, scenarios)
}

// subject reads the client under audit: the reference pool, or a
// transport of the factory's, closed afterwards.
func (r *Runner) subject() (subject, error) {
	t, c, err := r.client()
	switch {
	case err != nil:
		return subject{}, err
	case t != nil:
		defer t.CloseIdleConnections()
		return describe(t), nil
	case c != nil:
		defer closeIdle(c.top)
		return c.describe(r.deadline()), nil
	}
	return subject{reference: true}, nil
}

// meantText says which protocols are meant, for the report.
func (r *Runner) meantText() string {
	switch {
	case r.meant == nil:
		return "either"
	case r.meant.HTTP1() && r.meant.HTTP2():
		return "HTTP/1 and HTTP/2"
	case r.meant.HTTP2():
		return "HTTP/2 only"
	}
	return "HTTP/1 only"
}

// protoName names p in findings and skip reasons.
func protoName(p Proto) string {
	if p == HTTP2 {
		return "HTTP/2"
	}
	return "HTTP/1"
}

func (r *Runner) isMeant(p Proto) bool {
	if r.meant == nil {
		return true
	}
	if p == HTTP2 {
		return r.meant.HTTP2()
	}
	return r.meant.HTTP1()
}

// findings lists the protocols meant, among those of scenarios, that the
// client cannot speak: why, and the fix.
func (r *Runner) findings(sub subject, scenarios []Scenario) []string {
	if r.meant == nil {
		return nil
	}
	var out []string
	for _, p := range []Proto{HTTP1, HTTP2} {
		if !r.isMeant(p) || !slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.Proto == p }) {
			continue
		}
		if ok, why, fix := sub.speaks(p); !ok {
			out = append(out, fmt.Sprintf("%s is meant, but the transport cannot speak it: %s; fix: %s",
				protoName(p), why, fix))
		}
	}
	return out
}

// skipFor says why s is not run for sub, and how to make it run, or "".
func (r *Runner) skipFor(s Scenario, sub subject) (skip, fix string) {
	if !r.isMeant(s.Proto) {
		return fmt.Sprintf("%s is not meant (%s: %s)", protoName(s.Proto), nameProtocols, r.meantText()), ""
	}
	ok, why, fix := sub.speaks(s.Proto)
	if ok {
		return "", ""
	}
	if r.meant != nil {
		return fmt.Sprintf("the transport cannot speak %s, which is meant: %s", protoName(s.Proto), why), fix
	}
	other := "HTTP/2"
	if s.Proto == HTTP2 {
		other = "HTTP/1"
	}
	return fmt.Sprintf("the transport does not speak %s: %s", protoName(s.Proto), why),
		fmt.Sprintf("%s to audit %s; or declare %s with %s only", fix, protoName(s.Proto), nameProtocols, other)
}

// RunOne runs one scenario, with a fault server and a pool of its own, and
// judges it alone: the goroutines it starts, down to net/http's read and
// write loops and the server's connections, carry a pprof label of its
// own (connaudit.scenario), and any still running once it has closed what
// it opened are its leaks, whatever else runs beside it. RunOne may be
// called concurrently. A scenario over a protocol not meant, or that the
// transport cannot speak, is not run: its result says why in Skipped, and
// how to make it run in Fix.
func (r *Runner) RunOne(ctx context.Context, s Scenario) (res Result) {
	// Everything the scenario starts carries its label, down to net/http's
	// read and write loops and the fault server's connections: what is
	// left of it afterwards is its own, whatever else runs beside it.
	label := fmt.Sprintf("%s#%d", s.Name, runs.Add(1))
	pprof.Do(ctx, pprof.Labels(scenarioLabel, label), func(ctx context.Context) {
		res = r.runOne(ctx, s, label)
	})
	return res
}

// scenarioLabel is the pprof label that marks the goroutines of a
// scenario's run; runs numbers the runs, so that each label is unique.
const scenarioLabel = "connaudit.scenario"

var runs atomic.Uint64

func (r *Runner) runOne(ctx context.Context, s Scenario, label string) (res Result) {
	start := time.Now()
	res = Result{Name: s.Name, Contract: s.Contract, Proto: s.Proto, Fault: s.Fault, Bound: s.Bound, Expected: s.Expect, Wait: s.Wait}
	sub := subject{reference: true}
	cut := false // the run's context ended during the scenario
	var end guardEnd
	defer func() {
		res.Elapsed = time.Since(start)
		res.Pass = len(res.Mismatches) == 0 && res.Skipped == "" && res.NotConfigurable == ""
		if !res.Pass && res.Skipped == "" && res.NotConfigurable == "" && !cut {
			res.Fix = sub.fixFor(s, res.Observed, res.Mismatches, r.deadline(), end.beyond)
		}
	}()
	e, closeAll := r.setUp(&s, &res, &sub, label)
	sub.retryDefaults = r.retryRow == retryDefaults
	sub.ownLayer = r.retryLayer != nil
	if e == nil {
		return res
	}
	end = r.guarded(ctx, s, e, sub)
	r.observeCall(ctx, s, e, sub, end, &res)
	r.recoverAndCheck(ctx, e, end)
	closeAll()
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), r.recovery)
	if err := leaks.WaitLabeled(lctx, scenarioLabel, label); err != nil {
		e.obs.Leaks = append(e.obs.Leaks, err.Error())
	}
	lcancel()
	r.judge(s, sub, &res)
	if ctx.Err() != nil {
		// What the scenario saw after the run's own deadline or cancel
		// is that, not the fault's doing: no verdict.
		cut = true
		res.Mismatches = nil
		res.Skipped = fmt.Sprintf("cut: the run ended (%v) before the scenario did; no verdict", context.Cause(ctx))
	}
	return res
}

// setUp readies a scenario's run: the retry layer configured for its
// contract, the transport under audit read, the fault server started and
// the pool built, and the scenario's own setup. It returns nil, with the
// reason in res, when the scenario is not run; otherwise the environment
// and what closes it.
func (r *Runner) setUp(s *Scenario, res *Result, sub *subject, label string) (*env, func()) {
	t, c, err := r.client()
	switch {
	case err != nil:
		res.Mismatches = append(res.Mismatches, "setup: "+err.Error())
		return nil, nil
	case t != nil:
		*sub = describe(t)
	case c != nil:
		*sub = c.describe(r.deadline())
	}
	unused := func() {
		if t != nil {
			t.CloseIdleConnections()
		}
		if c != nil {
			closeIdle(c.top)
		}
	}
	if s.ServedOnly != "" {
		res.Skipped = "served only (connaudit serve): " + s.ServedOnly
		unused()
		return nil, nil
	}
	if note := r.contractOverHTTP2(s, *sub); note != "" {
		res.Proto, res.Expected = s.Proto, s.Expect
		res.Observed.Notes = append(res.Observed.Notes, note)
	}
	if res.Skipped, res.Fix = r.skipFor(*s, *sub); res.Skipped != "" {
		unused()
		return nil, nil
	}
	conns := &serverConns{}
	srv, err := faultserver.New(serverOptions(s, conns)...)
	if err != nil {
		res.Mismatches = append(res.Mismatches, "setup: "+err.Error())
		return nil, nil
	}
	srv.Handle(okPath, faultserver.OK{})
	col := &httptrace.Collector{}
	sig := newSignals(httptrace.KindWroteRequest)
	prog := newProgress()
	if sub.kind == kindOpaque {
		if res.Skipped, res.Fix = skipOpaque(*s, srv); res.Skipped != "" {
			srv.Close()
			unused()
			return nil, nil
		}
	}
	var p *pool.Pool
	if c != nil {
		p, err = r.newChainPool(*s, srv, httptrace.Multi(col, sig, prog), c)
	} else {
		p, err = r.newPool(*s, srv, httptrace.Multi(col, sig, prog), t)
	}
	if err != nil {
		srv.Close()
		unused()
		res.Mismatches = append(res.Mismatches, "setup: "+err.Error())
		return nil, nil
	}
	obs := &res.Observed
	if sub.sees != "" {
		obs.Notes = append(obs.Notes, sub.sees)
	}
	if !sub.reference {
		sub.learn(p)
		if note := sub.fitAttemptLimit(s); note != "" {
			obs.Notes = append(obs.Notes, note)
		}
	}
	var layer RetryFunc
	if s.Contract != "" {
		if layer, err = r.configureRetry(s.Policy.Policy); err != nil {
			p.CloseIdleConnections()
			srv.Close()
			res.NotConfigurable = err.Error()
			return nil, nil
		}
	}
	e := &env{Server: srv, Pool: p, Client: p.Client(), Target: srv.URL(), scenario: s, serverConns: conns, collector: col,
		signals: sig, progress: prog, obs: obs, retries: -1, label: label, retry: layer}
	if s.Contract != "" && r.retryLayer == nil {
		e.retry = referenceRetry(s.Policy.Policy, e)
	}
	closeAll := func() {
		p.CloseIdleConnections()
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
		if err := srv.Close(); err != nil {
			obs.Notes = append(obs.Notes, "fault server: "+err.Error())
		}
	}
	if err := setUpFault(s, e); err != nil {
		closeAll()
		res.Mismatches = append(res.Mismatches, "setup: "+err.Error())
		return nil, nil
	}
	e.markFaulted()
	return e, closeAll
}

// observeCall records what the faulted call did, and how the guard ended
// it if it did.
func (r *Runner) observeCall(ctx context.Context, s Scenario, e *env, sub subject, end guardEnd, res *Result) {
	obs := e.obs
	if end.err != nil {
		res.Mismatches = append(res.Mismatches, "run: "+end.err.Error())
	}
	late, inFlight := r.observe(s, e, end)
	switch {
	case end.beyond != nil:
		obs.Beyond = end.beyond.String()
		res.Mismatches = append(res.Mismatches, fmt.Sprintf(
			"beyond the guard: %s bounds stage %s, longer than the audit's guard deadline (%v): no verdict on it",
			end.beyond, obs.UnboundedStage, r.deadline()))
	case end.cut && obs.ClientAttempts > 1:
		// A retry layer's call: the attempts before may have ended at
		// their bounds; the call as a whole did not end in time.
		res.Mismatches = append(res.Mismatches, fmt.Sprintf(
			"unbounded: the call had not ended within %s: attempt %d of %d was at stage %s",
			end.within, inFlight, obs.ClientAttempts, obs.UnboundedStage))
	case end.cut:
		res.Mismatches = append(res.Mismatches, fmt.Sprintf(
			"unbounded: no timeout fired at stage %s within %s", obs.UnboundedStage, end.within))
	}
	if late > 0 {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf(
			"%s%d attempts after the call's context had ended", lateAttempts, late))
	}
	if msg := notHTTP2(s, e.Pool, obs); msg != "" {
		res.Mismatches = append(res.Mismatches, msg)
	}
	if !end.cut && !sub.reference {
		if note := measuredBound(obs.Timeline); note != "" {
			obs.Notes = append(obs.Notes, note)
		}
	}
	f := s.Expect.Fate
	if f == nil || end.cut || f.ClosedBy == "" && !sub.closesEach(s.Proto) {
		return
	}
	wait := r.recovery
	if hc, name := sub.healthCheck(); f.Reason == pool.ReasonPingTimeout && hc > 0 {
		if hc > r.deadline() {
			// The health check would notice the dark connection later
			// than the guard waits: no verdict on the connection, which
			// is let go so that /ok does not wait on it.
			obs.Beyond = name
			res.Mismatches = append(res.Mismatches, fmt.Sprintf("%s (%s) closes a connection that went dark "+
				"%v after its last frame, longer than the audit's guard deadline (%v): no verdict on it",
				beyondHealthCheck, name, hc, r.deadline()))
			e.Pool.CloseIdleConnections()
			return
		}
		// The connection went dark as the request went out: the health
		// check closes it within its own time of that.
		wait += hc
	}
	r.awaitClose(ctx, e.Pool, obs, wait)
}

// closeReadWait bounds the wait for the Transport to read a close the
// server made before the recovery's check.
const closeReadWait = time.Second

// beyondHealthCheck begins the mismatch of a transport whose HTTP/2 health
// check is longer than the guard waits.
const beyondHealthCheck = "beyond the guard: the HTTP/2 health check"

// recoverAndCheck sends /ok through the same pool, then checks that
// nothing is left active or open.
func (r *Runner) recoverAndCheck(ctx context.Context, e *env, end guardEnd) {
	obs := e.obs
	r.recover(ctx, e)
	check := r.recovery
	dialing := end.cut && vocab.SetupStage(obs.UnboundedStage)
	if dialing {
		// The dial goes on after the request ended (net/http detaches
		// it): it cannot settle while the fault holds it.
		check = 0
	}
	cctx, ccancel := context.WithTimeout(ctx, check)
	defer ccancel()
	// A connection the server has closed is open in the pool until the
	// Transport's read loop reads the close, which a loaded machine may
	// schedule after the recovery request: it is not over the cap. Wait,
	// bounded, for the pool to hold no more connections than the server.
	wctx, wcancel := context.WithTimeout(cctx, closeReadWait)
	e.Pool.WaitFor(wctx, func(s pool.Stats) bool { return s.Open <= e.serverConns.open() })
	wcancel()
	if err := e.Pool.Check(cctx); err != nil {
		for _, l := range splitErrors(err) {
			if dialing && strings.HasPrefix(l, "pool: did not settle: ") {
				if end.beyond != nil {
					// Its bound, not waited for, ends it: no verdict
					// on the stage, none on what it holds.
					continue
				}
				l = "the dial goes on after the request ended (net/http detaches it): nothing bounds it"
			}
			obs.Leaks = append(obs.Leaks, l)
		}
	}
	obs.Fate = fateOf(e.Pool, obs, obs.Fate.Reused)
}

// judge compares what was observed with what the scenario expects.
func (r *Runner) judge(s Scenario, sub subject, res *Result) {
	obs := &res.Observed
	exp := s.Expect
	if s.Contract != "" && r.retryLayer != nil {
		// What becomes of the reference's one connection is no part of a
		// contract: a layer of the caller's may close the pool's idle
		// connections when it gives up, or dial anew. Said, not judged.
		if exp.Dials != nil && *exp.Dials != obs.Dials {
			obs.Notes = append(obs.Notes, fmt.Sprintf("dials: %d (package retry: %d)", obs.Dials, *exp.Dials))
		}
		if f := exp.Fate; f != nil && *f != obs.Fate {
			obs.Notes = append(obs.Notes, fmt.Sprintf("connection fate: %s (package retry: %s)", obs.Fate, f))
		}
		exp.Dials, exp.Fate = nil, nil
	}
	if sub.connsUnseen {
		// Nothing of the RoundTripper's connections is seen: not checked,
		// rather than passed or failed.
		exp.Dials, exp.Fate = nil, nil
	}
	if givenUpUnderLoad(exp, *obs) {
		obs.Notes = append(obs.Notes, givenUpNote)
	}
	if tie := sub.tie(s); tie != "" {
		res.Mismatches = append(res.Mismatches, tie)
		exp.Class, exp.Stage = "", ""
	}
	if s.Close == "idle" && !sub.reference && !sub.boundsUnseen && (sub.idle <= 0 || sub.idle >= r.serverIdle) {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("%sIdleConnTimeout (%s) keeps an idle connection as long as "+
			"the server does, or longer (its keep-alive timeout: %v, %s): a request sent as the server closes it is lost "+
			"(net/http sends a GET again; a POST fails)", idleMismatch, yours(sub.idle), r.serverIdle, nameServerIdleTimeout))
	}
	m := verdicts(s, sub, *obs, compare(exp, *obs))
	if alt, ok := exp.OrExpect(); ok && len(m) > 0 && obs.Class == alt.Class && !obs.Unbounded {
		// The client took the other path the scenario allows: judged by
		// that one's counts.
		if am := verdicts(s, sub, *obs, compare(alt, *obs)); len(am) == 0 {
			m, exp = nil, alt
		}
	}
	if len(m) == 0 && exp.Note != "" {
		obs.Notes = append(obs.Notes, exp.Note)
		if exp.Note == noteLossToCaller {
			obs.Notes = append(obs.Notes, noteLossNetHTTP)
		}
	}
	res.Mismatches = append(res.Mismatches, m...)
}

// configureRetry returns the retry layer under audit configured for a
// contract's policy, or why it cannot be. A configure that panics is
// reported as such.
func (r *Runner) configureRetry(p retry.Policy) (do RetryFunc, err error) {
	if r.retryLayer == nil {
		return nil, nil // the reference, set up with the scenario's Env
	}
	defer func() {
		if v := recover(); v != nil {
			do, err = nil, fmt.Errorf("configuring the retry layer panicked: %v", v)
		}
	}()
	do, err = r.retryLayer(p)
	if err == nil && do == nil {
		err = errors.New("the retry layer's configure returned no function")
	}
	return do, err
}

// referenceRetry is package retry's policy p, noting the attempts its
// report lists, to compare them with the tracer's.
func referenceRetry(p retry.Policy, e *env) RetryFunc {
	return func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		resp, rep, err := p.DoWithReport(ctx, c, req)
		e.retries = len(rep.Attempts)
		return resp, err
	}
}

// newPool returns the pool under audit: a tracked clone of t, the
// caller's transport, or the reference pool when t is nil.
func (r *Runner) newPool(s Scenario, srv *faultserver.Server, obs httptrace.Observer, t *http.Transport) (*pool.Pool, error) {
	// No CaptureStacks: where the runner made a request says nothing of
	// the client under audit.
	opts := []pool.Option{pool.MaxConnsPerHost(1), pool.WithObserver(obs)}
	if t != nil {
		if s.Proto == HTTP2 && speaksHTTP2(t) {
			// The TLS configuration the audit adds would turn net/http's
			// automatic HTTP/2 off, which the transport has in service.
			opts = append(opts, pool.Protocols(protocols(true)))
		}
		if cfg := srv.ClientTLSConfig(); cfg != nil {
			merged := cfg
			if t.TLSClientConfig != nil {
				merged = t.TLSClientConfig.Clone()
				merged.RootCAs, merged.ServerName = cfg.RootCAs, cfg.ServerName
			}
			opts = append(opts, pool.TLSClientConfig(merged))
		}
		return pool.Track(t, append(opts, r.poolOpts...)...)
	}
	if cfg := srv.ClientTLSConfig(); cfg != nil {
		opts = append(opts, pool.TLSClientConfig(cfg))
	}
	// The reference pool: one connection per host, one kept idle, and the
	// bounds of the scenario's policy.
	opts = append(opts, pool.MaxIdleConnsPerHost(1), pool.Protocols(protocols(s.Proto == HTTP2)))
	opts = append(opts, referenceBounds(s.Policy)...)
	if s.Close == "idle" {
		// The reference closes an idle connection before the servers do.
		opts = append(opts, pool.IdleConnTimeout(r.serverIdle/2))
	}
	return pool.New(opts...)
}

// referenceBounds are the pool options by which the reference pool applies
// the bounds of a scenario's policy: its read interval as the wait for the
// headers and for each read of the body, its connect and TLS bounds. The
// attempt timeout and the pool's acquire timeout are the caller's context
// deadlines (drivers.go); a retry contract's are package retry's.
func referenceBounds(p Policy) []pool.Option {
	var opts []pool.Option
	if p.ReadTimeout > 0 {
		opts = append(opts, pool.ResponseHeaderTimeout(p.ReadTimeout), pool.BodyIdleTimeout(p.ReadTimeout))
	}
	if p.ConnectTimeout > 0 {
		opts = append(opts, pool.ConnectTimeout(p.ConnectTimeout))
	}
	if p.TLSTimeout > 0 {
		opts = append(opts, pool.TLSHandshakeTimeout(p.TLSTimeout))
	}
	if p.SendPingTimeout > 0 {
		opts = append(opts, pool.HTTP2(http.HTTP2Config{SendPingTimeout: p.SendPingTimeout, PingTimeout: p.PingTimeout}))
	}
	return opts
}

// speaksHTTP2 reports whether t speaks HTTP/2 over TLS as configured, by
// net/http's rules (see [whyNoHTTP2]).
func speaksHTTP2(t *http.Transport) bool {
	why, _ := whyNoHTTP2(t)
	return why == ""
}

// notHTTP2 says so when an HTTP/2 scenario's faulted request went over
// another protocol: the transport audited does not speak HTTP/2 (the
// scenario's verdict would be about HTTP/1).
func notHTTP2(s Scenario, p *pool.Pool, o *Observed) string {
	if s.Proto != HTTP2 || o.Conn == 0 {
		return ""
	}
	if c, ok := p.Conn(o.Conn); ok && c.Proto != "" && c.Proto != "h2" {
		return fmt.Sprintf("not HTTP/2: the transport spoke %s to a server that offers h2", c.Proto)
	}
	return ""
}

// observe fills in what the faulted request did. When the guard ended the
// call, it returns how many attempts started after that, and which attempt
// (counted from 1) was in flight when it did, whose stage is the
// unbounded one.
func (r *Runner) observe(s Scenario, e *env, end guardEnd) (late, inFlight int) {
	obs := e.obs
	var faulted []*httptrace.Timeline
	for _, tl := range e.collector.Timelines() {
		if tl.ID > e.mark && pathOf(tl) == faultPath {
			faulted = append(faulted, tl)
		}
	}
	obs.ClientAttempts = len(faulted)
	if started := e.progress.startedAfter(e.mark); started > len(faulted) {
		// An attempt whose body the retry layer never closed has not
		// finished: it was made all the same.
		obs.ClientAttempts = started
		obs.Notes = append(obs.Notes, fmt.Sprintf("%s of %d never finished: their bodies were not closed",
			text.Plural(int64(started-len(faulted)), "attempt"), started))
	}
	for _, tl := range faulted {
		obs.GetConns += tl.GetConns
		obs.TransportRetries += tl.Retries
	}
	if n := len(faulted); n > 0 {
		last := faulted[n-1]
		obs.Class, obs.Stage, obs.Status = last.Outcome.Class, last.Outcome.Stage, last.Outcome.Status
		if last.Outcome.Err != nil {
			obs.Error = last.RedactError(last.Outcome.Err)
		}
		obs.Conn = last.Conn.ID
		obs.BodyBytes = last.BodyBytes
		obs.Timeline = last
		if n > 1 {
			obs.Attempts = faulted
		}
		if e.called && e.callErr != nil {
			// A retry contract is about what the caller got: the retry
			// layer's error, classified as the caller sees it (an
			// http.Client's Timeout, say, is a deadline there, whatever
			// the Transport saw). An error after the last attempt got a
			// response came in a delay (a budget that ran out) or from a
			// rule of the layer's own (retries exhausted reported as an
			// error): no request was in flight.
			if last.Outcome.Class == httptrace.ClassOK {
				obs.Stage = ""
			}
			obs.Class = vocab.Classify(e.callErr, obs.Stage)
			obs.Error = last.RedactError(e.callErr)
		}
	} else if e.called && e.callErr != nil && obs.ClientAttempts > 0 {
		// Every attempt is still open: what the caller got is the layer's
		// error.
		obs.Class = vocab.Classify(e.callErr, "")
		if u, err := url.Parse(e.url()); err == nil {
			obs.Error = redact.Error(e.callErr, u)
		}
	}
	if e.retries >= 0 && e.retries != obs.ClientAttempts {
		obs.Notes = append(obs.Notes, fmt.Sprintf("retry policy reported %d attempts, tracer saw %d round trips", e.retries, obs.ClientAttempts))
	}
	if end.cut {
		obs.Unbounded = end.beyond == nil
		obs.UnboundedStage = obs.Stage
		for i, tl := range faulted {
			if tl.Start.Before(end.at) {
				inFlight = i + 1
				obs.UnboundedStage = tl.Outcome.Stage
			} else {
				late++
			}
		}
		if end.stage != "" {
			// The stage the guard saw the attempt at: the request it
			// ended may record another as it unwinds.
			obs.UnboundedStage = end.stage
		}
	}
	observeServer(s, e)
	closedBeneath(s, obs)
	obs.Dials = e.Pool.Stats().Dials
	obs.lost = lostReuse(e.Pool.Conns())
	return late, inFlight
}

// closedBeneath gives the class of the server's own close to a faulted
// request that failed writing to a connection net/http had closed beneath
// it ("use of closed network connection"), when the server closed that
// request's connection unread as its fault does. net/http's read side saw
// the server's close (its FIN or RST) and closed the connection while its
// write side still sent the body: a body net/http does not hold in memory
// (a RoundTripper that wraps it, as otelhttp does) goes after the headers
// are flushed, and which side notices first is a race. The loss is the
// server's close either way, as the scenario's fault made it.
func closedBeneath(s Scenario, obs *Observed) {
	tl := obs.Timeline
	if obs.Class != httptrace.ClassError || obs.Unread == 0 || tl == nil || !errors.Is(tl.Outcome.Err, net.ErrClosed) {
		return
	}
	for e := &s.Expect; e != nil; e = e.Or {
		if e.Class == httptrace.ClassServerClosed || e.Class == httptrace.ClassReset {
			obs.Class, obs.beneath = e.Class, true
			obs.Notes = append(obs.Notes, fmt.Sprintf("the request's write met its connection closed by net/http, "+
				"which had read the server's close first (%s): the server's close, as its fault made it", e.Class))
			return
		}
	}
}

// lostReuse lists, once each, why the client closed those of conns that
// had served a request for a setting of the transport's: the closes that
// kept a connection from being reused.
func lostReuse(conns []pool.Conn) []pool.CloseReason {
	var out []pool.CloseReason
	for _, c := range conns {
		if c.State != pool.StateClosed || c.ClosedBy != pool.ClosedByClient || c.Requests == 0 {
			continue
		}
		switch c.CloseReason {
		case pool.ReasonKeepAlivesOff, pool.ReasonIdleTimeout, pool.ReasonIdlePoolFull:
			if !slices.Contains(out, c.CloseReason) {
				out = append(out, c.CloseReason)
			}
		}
	}
	return out
}

// observeServer fills in what the fault server saw of the faulted
// request: requests, writes and keys, handler entries, connections
// accepted, the client's cancel.
func observeServer(s Scenario, e *env) {
	obs := e.obs
	c := e.Server.Counters(faultPath)
	obs.ServerRequests = c.RequestsRead - e.counters.RequestsRead
	obs.HiddenRetry = obs.ServerRequests > int64(obs.ClientAttempts)
	if s.Expect.Writes != nil {
		obs.Writes = c.WritesCommitted - e.counters.WritesCommitted
		if keys := e.Server.IdempotencyKeys(faultPath); len(keys) > e.keys {
			obs.Keys = keys[e.keys:]
		}
	}
	obs.HandlersEntered = c.HandlersEntered - e.counters.HandlersEntered
	obs.Unread = c.Unread - e.counters.Unread
	if e.accepted != nil {
		obs.ConnsAccepted = e.accepted()
	}
	obs.CancelObserved = c.CancelsObserved > e.counters.CancelsObserved
	if s.Expect.CancelObserved && !obs.CancelObserved {
		// The server learns of the cancel when the connection or stream
		// goes: wait for it, bounded.
		t := time.NewTimer(2 * time.Second)
		select {
		case <-e.Server.CancelObserved(faultPath):
			obs.CancelObserved = true
		case <-t.C:
		}
		t.Stop()
	}
}

func pathOf(tl *httptrace.Timeline) string {
	u := tl.RawURL()
	return u.Path
}

// recover sends /ok through the same pool.
func (r *Runner) recover(ctx context.Context, e *env) {
	rctx, cancel := context.WithTimeout(ctx, r.recovery)
	defer cancel()
	base := e.Server.URL()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+okPath, nil)
	if err != nil {
		e.obs.Leaks = append(e.obs.Leaks, "recovery: "+err.Error())
		return
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		e.obs.Leaks = append(e.obs.Leaks, "recovery: GET /ok failed: "+redact.Error(err, req.URL))
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	switch {
	case err != nil:
		e.obs.Leaks = append(e.obs.Leaks, "recovery: reading /ok: "+err.Error())
	case resp.StatusCode != http.StatusOK || string(body) != "ok":
		e.obs.Leaks = append(e.obs.Leaks, fmt.Sprintf("recovery: /ok answered %d %q", resp.StatusCode, body))
	default:
		e.obs.Recovered = true
	}
	for _, tl := range e.collector.Timelines() {
		if pathOf(tl) == okPath && tl.ID > e.mark && e.obs.Conn != 0 && tl.Conn.ID == e.obs.Conn {
			e.obs.Fate.Reused = true
		}
	}
}

// awaitClose waits, at most wait, for the faulted
// request's connection to close, when the scenario expects it closed or
// the transport keeps none ([subject.closesEach]).
// net/http may hand the caller the outcome before it closes the connection
// (HTTP/2's read loop fails the streams first, then closes; a connection
// the server sent GOAWAY on closes when its last stream is forgotten): the
// fate under audit is what the Transport does, not whether it did it
// before the caller went on, and the recovery request must not find the
// connection still open.
func (r *Runner) awaitClose(ctx context.Context, p *pool.Pool, o *Observed, wait time.Duration) {
	id := faultedConn(p, o)
	if id == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	p.WaitFor(wctx, func(pool.Stats) bool {
		c, ok := p.Conn(id)
		return !ok || c.State == pool.StateClosed || c.State == pool.StateFailed
	})
}

// faultedConn returns the id of the faulted request's connection: the one
// it got, or, when it never got one, the one dialed for it; 0 if none.
func faultedConn(p *pool.Pool, o *Observed) uint64 {
	id := o.Conn
	if id == 0 && o.Timeline != nil {
		for _, c := range p.Conns() {
			if c.DialedFor == o.Timeline.ID && c.State != pool.StateFailed {
				id = c.ID
			}
		}
	}
	return id
}

// fateOf returns the fate of the faulted request's connection: the one it
// got, or, when it never got one, the one dialed for it. A connection the
// recovery request was served on (reused) outlived the fault: if it closed
// after that (under load net/http gives a connection up when its write
// goroutine is late to report a request written), the recovery's request
// closed it, not the fault.
func fateOf(p *pool.Pool, o *Observed, reused bool) Fate {
	f := Fate{Reused: reused}
	if reused {
		return f
	}
	id := faultedConn(p, o)
	if id == 0 {
		f.None = true
		return f
	}
	if c, ok := p.Conn(id); ok && c.State == pool.StateClosed {
		f.ClosedBy, f.Reason = c.ClosedBy, c.CloseReason
	}
	return f
}

// protocols returns HTTP/1, with HTTP/2 if h2.
func protocols(h2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(h2)
	return p
}
