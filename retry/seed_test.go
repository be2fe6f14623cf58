package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// TestSeed holds the retry contracts at their reference numbers, one
// subtest per contract id, in virtual time (testing/synctest) over
// net.Pipe connections: a 1.5 s budget costs no wall-clock time, and times
// are exact. Requests, writes and idempotency keys are counted by the
// server; the client's attempts are the tracer's timelines of the contract's
// path (each round trip through the audited pool is one), never the
// policy's own report. P1 runs every contract again, each followed by /ok
// on the same single-connection pool and the pool's and the bubble's leak
// checks, and then the caller's cancel, during an attempt and during a
// delay.
//
// The default policy of the contracts: only 503 is retried, at most 2
// retries (3 attempts), a fixed delay; the attempt limit bounds one attempt
// through reading the body and restarts with each retry; the total budget
// bounds all attempts and delays.
func TestSeed(t *testing.T) {
	for _, c := range seedContracts() {
		t.Run(c.id, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := newSeedEnv(t, c)
				c.check(t, env.run(t, c))
			})
		})
	}
	t.Run("P1", func(t *testing.T) {
		for _, c := range append(seedContracts(), seedCancels()...) {
			t.Run(c.id, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					env := newSeedEnv(t, c)
					o := env.run(t, c)
					if c.cancel {
						c.check(t, o)
					}
					env.requireRecovered(t)
				})
			})
		}
	})
}

// seedContract is one contract: what the server does, the policy, the
// request, and what must be observed.
type seedContract struct {
	id         string
	steps      []seedStep // the i-th request to /r gets steps[i], then the last repeats
	policy     retry.Policy
	headerWait time.Duration // the Transport's ResponseHeaderTimeout
	bodyRead   time.Duration // the pool's BodyIdleTimeout: the longest wait for a read of the body
	method     string
	key        string // Idempotency-Key set by the caller
	keyPerTry  bool   // a new key on every attempt (the client stamps it)
	warm       bool   // one GET to /r first, to leave a kept-alive connection
	cancel     bool   // the caller cancels once everything is blocked (P1's cancels)
	check      func(t seedT, o seedOutcome)
}

// seedT is what a contract's check needs of a test: *testing.T, or a
// recorder that shows the check can fail.
type seedT interface {
	require.TestingT
	Helper()
}

// seedStep is what the server does with one request.
type seedStep struct {
	after  time.Duration // wait before answering (virtual time)
	status int           // 0: never answer, until the client goes
	write  bool          // commit a write (once per idempotency key)
	report bool          // with a write: the body reports the writes committed
	cut    bool          // close the connection after reading the request
	stall  bool          // send the headers and half the body, then wait for the client to go
}

func answer(status int) seedStep { return seedStep{status: status} }

// stallSent is how much of the body a stalled step sends: half of it.
const stallSent = 512

var (
	never   = seedStep{}
	cut     = seedStep{cut: true}
	stalled = seedStep{status: 200, stall: true}
)

// seedOutcome is what one contract's call did, as the caller, the tracer
// and the server saw it.
type seedOutcome struct {
	status   int // the response's, 0 on error
	body     string
	err      error           // of the call, or of reading the body
	class    httptrace.Class // of err, by the module's classifier
	elapsed  time.Duration   // virtual time of the call, body read included
	attempts int             // round trips through the pool (tracer timelines)
	requests int             // requests the server read
	writes   int             // writes the server committed
	keys     []string        // idempotency keys the server received, in order
	hidden   bool            // the Transport re-sent on its own (timeline)
}

func seedContracts() []seedContract {
	ms := time.Millisecond
	base := retry.Policy{AttemptTimeout: 3 * time.Second, TotalTimeout: 8 * time.Second, MaxRetries: 2, Delay: 10 * ms}
	with := func(edit func(*retry.Policy)) retry.Policy {
		p := base
		edit(&p)
		return p
	}
	// W1 and W2 retry the POST once with no delay, as Reactor's retry(1).
	postOnce := func(p *retry.Policy) { p.MaxRetries, p.Delay = 1, 0 }
	write503, write200 := seedStep{status: 503, write: true}, seedStep{status: 200, write: true, report: true}
	requests := func(t seedT, o seedOutcome, n int) {
		t.Helper()
		require.Equal(t, n, o.requests, "server-seen requests")
		require.Equal(t, n, o.attempts, "client attempts (tracer)")
	}
	return []seedContract{
		{id: "A1", steps: []seedStep{answer(200)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.NoError(t, o.err)
			require.Equal(t, "ok", o.body)
			requests(t, o, 1)
		}},
		{id: "A2", steps: []seedStep{answer(503), answer(503), answer(200)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.NoError(t, o.err)
			require.Equal(t, 200, o.status)
			require.Equal(t, "ok", o.body)
			requests(t, o, 3)
		}},
		{id: "A3", steps: []seedStep{answer(503)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.NoError(t, o.err)
			require.Equal(t, 503, o.status, "the last 503 itself reaches the caller")
			requests(t, o, 3)
		}},
		{id: "A4", steps: []seedStep{answer(404)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.NoError(t, o.err)
			require.Equal(t, 404, o.status)
			requests(t, o, 1)
		}},
		{id: "A5", steps: []seedStep{answer(500)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.NoError(t, o.err)
			require.Equal(t, 500, o.status, "500 is not retried")
			requests(t, o, 1)
		}},
		{id: "A6", steps: []seedStep{never}, policy: with(func(p *retry.Policy) { p.AttemptTimeout = time.Second }),
			check: func(t seedT, o seedOutcome) {
				require.ErrorIs(t, o.err, context.DeadlineExceeded)
				require.Equal(t, vocab.ClassDeadline, o.class, "the attempt timeout: %v", o.err)
				require.Equal(t, time.Second, o.elapsed)
				requests(t, o, 1)
			}},
		// A7 and A10: Reactor Netty's responseTimeout of 250 ms, an interval
		// between reads, is two bounds in Go: the wait for the headers,
		// and the wait for each read of the body.
		{id: "A7", steps: []seedStep{never}, headerWait: 250 * ms, policy: base, check: func(t seedT, o seedOutcome) {
			require.Error(t, o.err)
			require.Equal(t, vocab.ClassResponseHeaderTimeout, o.class, "the header wait's timeout, not the attempt's: %v", o.err)
			require.ErrorContains(t, o.err, "timeout awaiting response headers")
			require.Equal(t, 250*ms, o.elapsed)
			requests(t, o, 1)
		}},
		{id: "A8", steps: []seedStep{answer(503)},
			policy: with(func(p *retry.Policy) {
				p.AttemptTimeout, p.TotalTimeout, p.Delay = time.Second, 1500*ms, time.Second
			}),
			check: func(t seedT, o seedOutcome) {
				require.ErrorIs(t, o.err, context.DeadlineExceeded, "a total-budget timeout error")
				require.Equal(t, vocab.ClassDeadline, o.class)
				require.ErrorContains(t, o.err, "total budget of 1.5s ran out waiting to retry")
				var last retry.Attempt
				require.ErrorAs(t, o.err, &last)
				require.Equal(t, 2, last.N)
				require.Equal(t, 503, last.StatusCode, "the last response's status, from the error")
				require.Equal(t, 1500*ms, o.elapsed, "raised during the second delay, when the budget ends")
				requests(t, o, 2)
			}},
		{id: "A9", steps: []seedStep{{after: 400 * ms, status: 503}, {after: 400 * ms, status: 200}},
			policy: with(func(p *retry.Policy) {
				p.AttemptTimeout, p.TotalTimeout, p.Delay = 500*ms, 2*time.Second, 200*ms
			}),
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				require.Equal(t, "ok", o.body)
				require.Equal(t, time.Second, o.elapsed, "400 + 200 + 400 ms: the attempt limit restarted")
				requests(t, o, 2)
			}},
		{id: "A10", steps: []seedStep{stalled}, bodyRead: 250 * ms, policy: base, check: func(t seedT, o seedOutcome) {
			require.Equal(t, 200, o.status, "the headers came")
			require.ErrorIs(t, o.err, httptrace.ErrBodyIdleTimeout, "reading the body")
			require.Equal(t, vocab.ClassBodyIdleTimeout, o.class, "the body read's timeout, not the attempt's: %v", o.err)
			require.Equal(t, strings.Repeat("x", stallSent), o.body, "what came before the stall")
			require.Equal(t, 250*ms, o.elapsed, "250 ms after the last read")
			requests(t, o, 1)
		}},
		{id: "W1", steps: []seedStep{write503, write200}, method: http.MethodPost,
			policy: with(func(p *retry.Policy) { postOnce(p); p.UnsafeRetryNonIdempotent = true }),
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				require.Equal(t, 200, o.status)
				requests(t, o, 2)
				require.Equal(t, 2, o.writes, "the retried POST wrote twice")
				require.Equal(t, "writes committed: 2", o.body, "as the server reports it")
				require.Zero(t, o.elapsed, "retried with no delay")
			}},
		{id: "W2", steps: []seedStep{write503, write200}, method: http.MethodPost, key: "order-7",
			policy: with(func(p *retry.Policy) { postOnce(p); p.RetryIdempotencyKey = true }),
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				require.Equal(t, 200, o.status)
				requests(t, o, 2)
				require.Equal(t, 1, o.writes, "the key kept across the retry: one write")
				require.Equal(t, "writes committed: 1", o.body, "as the server reports it")
				require.Equal(t, []string{"order-7", "order-7"}, o.keys)
				require.Zero(t, o.elapsed, "retried with no delay")
			}},
		{id: "W3", steps: []seedStep{write503, write200}, method: http.MethodPost, key: "order-7", keyPerTry: true,
			policy: with(func(p *retry.Policy) { postOnce(p); p.RetryIdempotencyKey = true }),
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				requests(t, o, 2)
				require.Equal(t, 2, o.writes, "a new key per attempt: the server cannot deduplicate")
				require.Equal(t, []string{"order-7-attempt-1", "order-7-attempt-2"}, o.keys)
			}},
		{id: "W4", steps: []seedStep{write503, write200}, method: http.MethodPost, policy: base,
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				require.Equal(t, 503, o.status, "not retried: the 503 reaches the caller")
				requests(t, o, 1)
				require.Equal(t, 1, o.writes)
			}},
		{id: "H1", steps: []seedStep{answer(200), cut, answer(200)}, warm: true, policy: base,
			check: func(t seedT, o seedOutcome) {
				require.NoError(t, o.err)
				require.Equal(t, "ok", o.body)
				require.Equal(t, 1, o.attempts, "the caller made one attempt")
				require.Equal(t, 2, o.requests, "the server read two")
				require.True(t, o.hidden, "the tracer saw the Transport send it again")
			}},
		// H2 is Reactor Netty's disableRetry(true): no hidden retry. Go keeps
		// it on a fresh connection, and cannot switch it off on a reused
		// one (H1).
		{id: "H2", steps: []seedStep{cut, answer(200)}, policy: base, check: func(t seedT, o seedOutcome) {
			require.Error(t, o.err)
			require.Equal(t, vocab.ClassServerClosed, o.class, "the disconnect reaches the caller: %v", o.err)
			requests(t, o, 1)
			require.False(t, o.hidden, "nothing re-sent on a fresh connection")
		}},
	}
}

// seedCancels are P1's cancels: the caller cancels once everything is
// blocked, in an attempt the server never answers, and in the delay after
// a 503.
func seedCancels() []seedContract {
	canceled := func(t seedT, o seedOutcome) {
		t.Helper()
		require.ErrorIs(t, o.err, context.Canceled)
		require.Equal(t, vocab.ClassCanceled, o.class)
		require.Equal(t, 1, o.requests, "server-seen requests")
		require.Equal(t, 1, o.attempts, "client attempts (tracer)")
	}
	p := retry.Policy{AttemptTimeout: 3 * time.Second, TotalTimeout: 8 * time.Second, MaxRetries: 2, Delay: time.Second}
	return []seedContract{
		{id: "cancel-in-attempt", steps: []seedStep{never}, policy: p, cancel: true, check: canceled},
		{id: "cancel-in-delay", steps: []seedStep{answer(503)}, policy: p, cancel: true, check: func(t seedT, o seedOutcome) {
			canceled(t, o)
			require.ErrorContains(t, o.err, "waiting to retry")
		}},
	}
}

// seedEnv is one contract's world inside a bubble: a server over net.Pipe,
// and a tracked single-connection pool.
type seedEnv struct {
	srv  *seedServer
	pool *pool.Pool
	col  *httptrace.Collector
}

func newSeedEnv(t *testing.T, c seedContract) *seedEnv {
	t.Helper()
	srv := &seedServer{}
	pn := newPipeNet(t, srv)
	col := &httptrace.Collector{}
	tr := &http.Transport{DialContext: pn.dial, ResponseHeaderTimeout: c.headerWait}
	opts := []pool.Option{pool.MaxConnsPerHost(1), pool.MaxIdleConnsPerHost(1), pool.WithObserver(col)}
	if c.bodyRead > 0 {
		opts = append(opts, pool.BodyIdleTimeout(c.bodyRead))
	}
	p, err := pool.Track(tr, opts...)
	require.NoError(t, err)
	t.Cleanup(p.CloseIdleConnections) // before the server closes
	return &seedEnv{srv: srv, pool: p, col: col}
}

// run makes the contract's call and returns what was observed.
func (env *seedEnv) run(t *testing.T, c seedContract) seedOutcome {
	t.Helper()
	env.srv.reset(c.steps)
	client := env.pool.Client()
	if c.warm {
		resp, err := client.Get(pipeURL)
		require.NoError(t, err)
		require.Equal(t, "ok", readAll(t, resp))
	}
	mark := env.lastTimeline()
	before := env.srv.counts()
	if c.keyPerTry {
		client = &http.Client{Transport: &keyStamper{base: client.Transport, key: c.key}}
	}

	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if method != http.MethodGet {
		body = strings.NewReader(`{"order":7}`)
	}
	req, err := http.NewRequest(method, pipeURL, body)
	require.NoError(t, err)
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}

	var o seedOutcome
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.policy.Do(ctx, client, req)
		done <- result{resp, err}
	}()
	if c.cancel {
		synctest.Wait() // blocked: in the attempt, or in the delay
		cancel()
	}
	r := <-done
	o.err = r.err
	stage := httptrace.Stage("")
	if r.err == nil {
		o.status = r.resp.StatusCode
		b, rerr := io.ReadAll(r.resp.Body)
		r.resp.Body.Close()
		o.body, o.err, stage = string(b), rerr, vocab.StageBody
	}
	o.elapsed = time.Since(start)
	o.class = vocab.Classify(o.err, stage)

	synctest.Wait() // every server handler and late hook has run
	for _, tl := range env.col.Timelines() {
		if tl.ID > mark && tl.RawURL().Path == "/r" {
			o.attempts++
			o.hidden = o.hidden || tl.Retries > 0
		}
	}
	after := env.srv.counts()
	o.requests = after.requests - before.requests
	o.writes = after.writes - before.writes
	o.keys = after.keys[len(before.keys):]
	return o
}

func (env *seedEnv) lastTimeline() uint64 {
	var id uint64
	for _, tl := range env.col.Timelines() {
		id = max(id, tl.ID)
	}
	return id
}

// requireRecovered is P1: the same pool serves /ok, and then holds no
// active connection and no open body. The bubble itself fails the test if
// a goroutine it started is still blocked when the test ends.
func (env *seedEnv) requireRecovered(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://pipe.test/ok", nil)
	require.NoError(t, err)
	resp, err := env.pool.Client().Do(req)
	require.NoError(t, err, "the same pool must serve /ok")
	require.Equal(t, "ok", readAll(t, resp))
	require.NoError(t, env.pool.Check(ctx), "nothing left behind")
}

// keyStamper gives every attempt a new Idempotency-Key, as a client that
// generates the key inside its retry loop does.
type keyStamper struct {
	base http.RoundTripper
	key  string
	mu   sync.Mutex
	n    int
}

func (k *keyStamper) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	k.n++
	n := k.n
	k.mu.Unlock()
	r := req.Clone(req.Context())
	r.Header.Set("Idempotency-Key", fmt.Sprintf("%s-attempt-%d", k.key, n))
	return k.base.RoundTrip(r)
}

// seedServer serves /ok, and /r by the contract's steps; it counts the
// requests to /r, the writes it commits (once per idempotency key) and the
// keys it receives.
type seedServer struct {
	mu       sync.Mutex
	steps    []seedStep
	requests int
	writes   int
	keys     []string
	seen     map[string]bool
}

type seedCounts struct {
	requests, writes int
	keys             []string
}

func (s *seedServer) reset(steps []seedStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps, s.requests, s.writes, s.keys, s.seen = steps, 0, 0, nil, map[string]bool{}
}

func (s *seedServer) counts() seedCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seedCounts{s.requests, s.writes, append([]string(nil), s.keys...)}
}

func (s *seedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ok" {
		_, _ = io.WriteString(w, "ok")
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.requests++
	step := s.steps[min(s.requests, len(s.steps))-1]
	if step.write {
		key := r.Header.Get("Idempotency-Key")
		if key != "" {
			s.keys = append(s.keys, key)
		}
		if key == "" || !s.seen[key] {
			s.writes++
		}
		if key != "" {
			s.seen[key] = true
		}
	}
	writes := s.writes
	s.mu.Unlock()

	switch {
	case step.cut:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case step.status == 0:
		<-r.Context().Done() // never answers; the client goes
		return
	case step.stall:
		w.Header().Set("Content-Length", strconv.Itoa(2*stallSent))
		_, _ = io.WriteString(w, strings.Repeat("x", stallSent))
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // the rest never comes; the client goes
		return
	}
	if step.after > 0 {
		select {
		case <-time.After(step.after):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case step.report:
		w.WriteHeader(step.status)
		_, _ = fmt.Fprintf(w, "writes committed: %d", writes)
		return
	case step.status == http.StatusOK:
		_, _ = io.WriteString(w, "ok")
		return
	}
	http.Error(w, http.StatusText(step.status), step.status)
}

// TestSeedChecksCanFail runs each contract taken from Reactor Netty's
// with one thing about the client made wrong, and requires its check to
// fail: a check that cannot fail holds nothing.
func TestSeedChecksCanFail(t *testing.T) {
	byID := map[string]seedContract{}
	for _, c := range append(seedContracts(), seedCancels()...) {
		byID[c.id] = c
	}
	for _, m := range []struct {
		id, mutation string
		edit         func(*seedContract)
	}{
		{"A7", "no ResponseHeaderTimeout: the attempt limit ends the wait", func(c *seedContract) { c.headerWait = 0 }},
		{"A10", "no BodyIdleTimeout: the attempt limit ends the body", func(c *seedContract) { c.bodyRead = 0 }},
		{"W1", "a 10ms delay before the retry", func(c *seedContract) { c.policy.Delay = 10 * time.Millisecond }},
		{"W1", "the POST not replayed", func(c *seedContract) { c.policy.UnsafeRetryNonIdempotent = false }},
		{"W2", "a 10ms delay before the retry", func(c *seedContract) { c.policy.Delay = 10 * time.Millisecond }},
		{"H2", "errors retried", func(c *seedContract) {
			c.policy.Retryable = func(*http.Request, *http.Response, error) bool { return true }
		}},
		{"cancel-in-attempt", "no cancel: the attempt limit ends it", func(c *seedContract) { c.cancel = false }},
		{"cancel-in-delay", "no delay to cancel in: the retries run out first", func(c *seedContract) {
			c.policy.Delay, c.cancel = 0, false
		}},
	} {
		t.Run(m.id+"/"+m.mutation, func(t *testing.T) {
			c, ok := byID[m.id]
			require.True(t, ok, m.id)
			m.edit(&c)
			synctest.Test(t, func(t *testing.T) {
				env := newSeedEnv(t, c)
				o := env.run(t, c)
				rec := &recorder{}
				func() {
					defer func() {
						if v := recover(); v != nil && v != errFailNow {
							panic(v)
						}
					}()
					c.check(rec, o)
				}()
				require.True(t, rec.failed, "the check passed a client with %s: %+v", m.mutation, o)
			})
		})
	}
}

// recorder is a seedT that records a failure instead of failing the test.
type recorder struct{ failed bool }

var errFailNow = fmt.Errorf("check failed")

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; panic(errFailNow) }
func (r *recorder) Helper()               {}
