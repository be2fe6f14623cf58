package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// TestEveryScenarioBothWays walks the catalogue: every scenario is run in
// process, on the reference pool, and served, to a kit whose client is the
// same — net/http in a pool configured from the scenario's policy, package
// retry for a contract — each judged by its own judge (the audit's, and
// serve's), and both pass. A scenario one way cannot take says why
// (InProcessOnly, ServedOnly), and is then taken the other way.
func TestEveryScenarioBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole catalogue twice")
	}
	beside(t)
	cat := audit.Catalogue()
	served := map[string]bool{}
	for _, sp := range catalogue(false) {
		served[sp.Name] = true
	}
	for _, s := range cat {
		switch {
		case s.InProcessOnly != "" && s.ServedOnly != "":
			t.Errorf("%s is taken neither way", s.Name)
		case s.InProcessOnly != "" && served[s.Name]:
			t.Errorf("%s is in process only, and served", s.Name)
		case s.InProcessOnly == "" && !served[s.Name]:
			t.Errorf("%s is not served, and says no reason", s.Name)
		}
	}

	r, err := audit.NewRunner(audit.Parallel(4))
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(t.Context(), cat)
	for i, res := range rep.Results {
		s := cat[i]
		switch {
		case s.ServedOnly != "":
			if !strings.HasPrefix(res.Skipped, "served only") {
				t.Errorf("in process, %s: served only, but %+v", s.Name, res)
			}
		case !res.Pass:
			t.Errorf("in process, %s: %q, fix %q", s.Name, res.Mismatches, res.Fix)
		}
	}

	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	session := fullKit(t, srv)
	judged := map[string]bool{}
	for _, res := range session.Results {
		judged[res.Name] = true
		switch {
		case res.NotReported || res.Skipped != "" || res.NotConfigurable != "":
			t.Errorf("served, %s: no verdict: %+v", res.Name, res)
		case !res.Pass:
			t.Errorf("served, %s: %q, fix %q", res.Name, res.Mismatches, res.Fix)
		}
	}
	for name := range served {
		if !judged[name] {
			t.Errorf("served, %s: not offered to the kit", name)
		}
	}
}

// fullKit is a kit in Go that takes every steps: its client is net/http in
// a pool of connaudit's configured from each scenario's policy, with
// package retry for a retry contract, and raw sockets for the held body
// (net/http waits for a body it asked for, whatever happens meanwhile).
func fullKit(t *testing.T, srv *Server) *SessionReport {
	t.Helper()
	var opened Opened
	if code := ctlDo(t, "POST", srv.URL()+"/v1/sessions", OpenRequest{Protocol: Protocol, Kit: "go-test",
		Client: Client{Name: "net/http", Version: "test"}, Protocols: []string{"http1", "h2"}}, &opened); code != 201 {
		t.Fatalf("open: %d", code)
	}
	var list Scenarios
	ctlDo(t, "GET", opened.ScenariosURL, nil, &list)
	for _, sc := range list.Scenarios {
		var rep KitReport
		if sc.Steps == audit.StepsWarmThenHeldBody {
			res := heldBodyReport(t, sc, true)
			rep = res
		} else {
			rep = fullKitScenario(t, srv, sc)
		}
		var res Result
		if code := ctlDo(t, "POST", opened.ReportURL, rep, &res); code != 200 {
			t.Fatalf("report %s: %d", sc.Name, code)
		}
	}
	var done SessionReport
	ctlDo(t, "POST", opened.DoneURL, Done{}, &done)
	return &done
}

// ms2d is a policy's milliseconds as a duration.
func ms2d(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// fullKitScenario runs one scenario through a new pool configured from its
// policy.
func fullKitScenario(t *testing.T, srv *Server, sc ScenarioSpec) KitReport {
	p := sc.Policy
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CA())
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(sc.Proto == "h2")
	opts := []pool.Option{pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1), pool.Protocols(protos),
		pool.TLSClientConfig(&tls.Config{RootCAs: roots})}
	if p.ReadTimeoutMS > 0 {
		opts = append(opts, pool.ResponseHeaderTimeout(ms2d(p.ReadTimeoutMS)), pool.BodyIdleTimeout(ms2d(p.ReadTimeoutMS)))
	}
	if p.ConnectTimeoutMS > 0 {
		opts = append(opts, pool.ConnectTimeout(ms2d(p.ConnectTimeoutMS)))
	}
	if p.TLSTimeoutMS > 0 {
		opts = append(opts, pool.TLSHandshakeTimeout(ms2d(p.TLSTimeoutMS)))
	}
	if p.SendPingTimeoutMS > 0 {
		opts = append(opts, pool.HTTP2(http.HTTP2Config{SendPingTimeout: ms2d(p.SendPingTimeoutMS), PingTimeout: ms2d(p.PingTimeoutMS)}))
	}
	pl, err := pool.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	client := pl.Client()
	contract := len(p.RetryStatuses) > 0
	var attempts atomic.Int64
	counted := *client
	counted.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		if sc.Request.KeyPerAttempt != "" {
			r = r.Clone(r.Context())
			r.Header.Set("Idempotency-Key", fmt.Sprintf("%s-attempt-%d", sc.Request.KeyPerAttempt, attempts.Load()))
		}
		return client.Transport.RoundTrip(r)
	})
	get := func(ctx context.Context, url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	// call makes the faulted call; readBytes, when positive, is how much of
	// the body it reads before it closes it.
	call := func(ctx context.Context, readBytes int) Outcome {
		if p.AttemptTimeoutMS > 0 && !contract {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, ms2d(p.AttemptTimeoutMS))
			defer cancel()
		}
		var body io.Reader
		if sc.Request.Body != "" {
			body = strings.NewReader(sc.Request.Body)
		}
		req, err := http.NewRequestWithContext(ctx, sc.Request.Method, sc.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range sc.Request.Headers {
			req.Header.Set(k, v)
		}
		if sc.Request.KeyPerAttempt != "" {
			req.Header.Set("Idempotency-Key", sc.Request.KeyPerAttempt)
		}
		var resp *http.Response
		if contract {
			rp := retry.Policy{AttemptTimeout: ms2d(p.AttemptTimeoutMS), TotalTimeout: ms2d(p.TotalTimeoutMS),
				MaxRetries: p.MaxRetries, Delay: ms2d(p.DelayMS), RetryIdempotencyKey: p.RetryWithIdempotencyKey,
				UnsafeRetryNonIdempotent: p.RetryAnyMethod}
			resp, err = rp.Do(ctx, &counted, req)
		} else {
			resp, err = counted.Do(req)
		}
		if err != nil {
			return Outcome{Error: kindOf(ctx, err, sc)}
		}
		defer resp.Body.Close()
		if readBytes > 0 {
			_, err = io.CopyN(io.Discard, resp.Body, int64(readBytes))
		} else {
			_, err = io.Copy(io.Discard, resp.Body)
		}
		if err != nil {
			return Outcome{Error: kindOf(ctx, err, sc)}
		}
		return Outcome{Status: resp.StatusCode}
	}
	ctx, cancel := context.WithTimeout(t.Context(), ms2d(sc.GuardMS)+5*time.Second)
	defer cancel()
	warm := func() {
		for range max(1, sc.WarmRequests) {
			if err := get(ctx, sc.WarmURL); err != nil {
				t.Errorf("%s: warm-up: %v", sc.Name, err)
			}
		}
	}
	var o Outcome
	start := time.Now()
	switch sc.Steps {
	case audit.StepsRequest:
		o = call(ctx, 0)
	case audit.StepsReadThenClose:
		o = call(ctx, sc.ReadBytes)
	case audit.StepsWarmThenRequest:
		warm()
		start = time.Now()
		o = call(ctx, 0)
	case audit.StepsWarmCloseThenRequest:
		warm()
		var closed Closed
		if code := ctlDo(t, "POST", sc.CloseURL, struct{}{}, &closed); code != 200 {
			t.Fatalf("close %s: %d", sc.Name, code)
		}
		start = time.Now()
		o = call(ctx, 0)
	case audit.StepsCancelWhenEntered:
		cctx, ccancel := context.WithCancel(ctx)
		go func() {
			ctlDo(t, "GET", sc.EnteredURL, nil, nil)
			ccancel()
		}()
		o = call(cctx, 0)
		ccancel()
	case audit.StepsSecondCaller:
		hctx, hcancel := context.WithCancel(ctx)
		held := make(chan struct{})
		go func() {
			defer close(held)
			get(hctx, sc.HoldURL)
		}()
		ctlDo(t, "GET", sc.EnteredURL, nil, nil)
		start = time.Now()
		wctx, wcancel := context.WithTimeout(ctx, ms2d(p.PoolAcquireTimeoutMS))
		o = call(wctx, 0)
		wcancel()
		if o.Error != nil && o.Error.Kind == KindTimeout {
			o.Error.Kind = KindPool // the wait for the pool's one connection ran out
		}
		hcancel()
		<-held
	default:
		t.Fatalf("%s: steps %s unknown to the test kit", sc.Name, sc.Steps)
	}
	elapsed := ms(time.Since(start))
	if sc.SettleURL != "" {
		var settled Closed
		if code := ctlDo(t, "POST", sc.SettleURL, struct{}{}, &settled); code != 200 {
			t.Fatalf("settle %s: %d", sc.Name, code)
		}
	}
	okOut := Outcome{Status: 200}
	if err := get(ctx, sc.OKURL); err != nil {
		okOut = Outcome{Error: &ErrorOutcome{Kind: KindConnection, Message: err.Error()}}
	}
	n := int(attempts.Load())
	return KitReport{Scenario: sc.Name, Outcome: &o, ElapsedMS: elapsed, Attempts: &n, OK: &okOut,
		Config: "net/http in a connaudit pool, package retry for the contracts"}
}

// kindOf is the protocol's kind of a Go client's error.
func kindOf(ctx context.Context, err error, sc ScenarioSpec) *ErrorOutcome {
	class := vocab.ClassifyContext(ctx, err, "")
	kind := KindConnection
	switch {
	case class == vocab.ClassCanceled && errors.Is(context.Cause(ctx), context.Canceled):
		kind = KindCanceled
	case class == vocab.ClassCanceled, class == vocab.ClassDeadline, class == vocab.ClassTimeout,
		class == vocab.ClassResponseHeaderTimeout, class == vocab.ClassBodyIdleTimeout,
		class == vocab.ClassTLSHandshakeTimeout, class == vocab.ClassConnectTimeout:
		kind = KindTimeout
	}
	return &ErrorOutcome{Kind: kind, Message: err.Error()}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
