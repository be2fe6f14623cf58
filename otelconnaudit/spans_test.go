package otelconnaudit_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// stage returns the spans whose name starts with prefix.
func stage(spans tracetest.SpanStubs, prefix string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only span named with prefix.
func one(t *testing.T, spans tracetest.SpanStubs, prefix string) tracetest.SpanStub {
	t.Helper()
	s := stage(spans, prefix)
	require.Len(t, s, 1, "spans %q among %v", prefix, names(spans))
	return s[0]
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func length(s tracetest.SpanStub) time.Duration { return s.EndTime.Sub(s.StartTime) }

func attr(s tracetest.SpanStub, key string) (string, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// under returns the spans whose parent is sc.
func under(spans tracetest.SpanStubs, sc trace.SpanContext) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Parent.SpanID() == sc.SpanID() && s.Parent.TraceID() == sc.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

// TestSpansNewAndReused checks the stages of a request that dials (DNS,
// connects and TLS under the wait for a connection) and of one on the
// kept-alive connection (no wait), each span under the caller's, with
// the lengths Timings gives.
func TestSpansNewAndReused(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t, faultserver.TLS())
	p, col, _ := s.instrumented(t, pool.TLSClientConfig(srv.ClientTLSConfig()), pool.Protocols(http1()))
	// "localhost", so that the dial has a DNS stage (from /etc/hosts).
	url := strings.Replace(srv.URL(), "127.0.0.1", "localhost", 1) + "/ok"

	ctx, caller := s.parent(t)
	do(t, ctx, p, url, -1)
	do(t, ctx, p, url, -1)
	caller.End()
	spans := s.spans.GetSpans()
	tls := col.Timelines()
	require.Len(t, tls, 2)
	first, second := tls[0].Timings(), tls[1].Timings()

	top := under(spans, caller.SpanContext())
	require.ElementsMatch(t, []string{
		"HTTP wait_for_connection localhost:" + srv.URL()[strings.LastIndex(srv.URL(), ":")+1:],
		"HTTP write_request", "HTTP wait_for_response", "HTTP read_response_body",
		"HTTP write_request", "HTTP wait_for_response", "HTTP read_response_body",
	}, names(top))

	wait := one(t, top, "HTTP wait_for_connection")
	dial := under(spans, wait.SpanContext)
	dns := one(t, dial, "DNS lookup localhost")
	handshake := one(t, dial, "TLS client handshake localhost")
	connects := stage(dial, "socket connect ")
	require.NotEmpty(t, connects)
	require.Len(t, dial, 2+len(connects), "the dial's spans: %v", names(dial))
	ok := one(t, connects, "socket connect 127.0.0.1:")
	require.Equal(t, codes.Unset, ok.Status.Code)
	v, _ := attr(ok, "network.peer.address")
	require.Equal(t, "127.0.0.1", v)
	v, _ = attr(handshake, "tls.protocol.version")
	require.Equal(t, "1.3", v)
	v, _ = attr(dns, "dns.question.name")
	require.Equal(t, "localhost", v)

	require.Equal(t, first.DNS, length(dns))
	require.Equal(t, first.TLS, length(handshake))
	require.Equal(t, first.PoolWait+first.DNS+first.Connect+first.TLS, length(wait))
	for i, tm := range []httptrace.Timings{first, second} {
		require.Equal(t, tm.Write, length(stage(top, "HTTP write_request")[i]), "write %d", i)
		require.Equal(t, tm.Server, length(stage(top, "HTTP wait_for_response")[i]), "server %d", i)
		body := stage(top, "HTTP read_response_body")[i]
		require.Equal(t, tm.Transfer, length(body), "transfer %d", i)
		v, _ := attr(body, "http.response.body.size")
		require.Equal(t, "2", v)
	}
	v, _ = attr(stage(top, "HTTP write_request")[1], "connaudit.conn.new")
	require.Equal(t, "false", v)
	for _, sp := range spans {
		require.Equal(t, caller.SpanContext().TraceID(), sp.SpanContext.TraceID())
		require.False(t, sp.EndTime.Before(sp.StartTime), sp.Name)
	}
}

func http1() http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return p
}

// TestSpansHTTP2 sends concurrent requests over one HTTP/2 connection,
// each under its own caller's span, one body closed unread: every request
// gets its own stages, once each, under its own caller, all ended.
func TestSpansHTTP2(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t, faultserver.TLS())
	p, col, _ := s.instrumented(t, pool.TLSClientConfig(srv.ClientTLSConfig()))
	ctx := bounded(t)
	do(t, ctx, p, srv.URL()+"/ok", -1) // opens the connection

	const n = 8
	callers := make([]trace.Span, n)
	var wg sync.WaitGroup
	for i := range n {
		cctx, sp := s.tp.Tracer("test").Start(ctx, fmt.Sprintf("caller-%d", i))
		callers[i] = sp
		wg.Go(func() {
			req, err := http.NewRequestWithContext(cctx, http.MethodGet, srv.URL()+"/large", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := p.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			if i != 0 {
				io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	for _, sp := range callers {
		sp.End()
	}
	require.NoError(t, p.Quiesce(ctx))
	for _, tl := range col.Timelines()[1:] {
		require.Equal(t, "HTTP/2.0", tl.Proto)
	}
	spans := s.spans.GetSpans()
	for i, c := range callers {
		mine := under(spans, c.SpanContext())
		require.ElementsMatch(t, []string{"HTTP write_request", "HTTP wait_for_response", "HTTP read_response_body"},
			names(mine), "caller %d", i)
		body := one(t, mine, "HTTP read_response_body")
		v, _ := attr(body, "connaudit.body.closed_early")
		require.Equal(t, i == 0, v == "true", "caller %d", i)
	}
	for _, sp := range spans {
		require.False(t, sp.EndTime.Before(sp.StartTime), sp.Name)
	}
}

// TestSpansBodyNeverRead checks that the stages up to the response are
// exported when it arrives, before its body is read or closed, and the
// body's stage when it is closed.
func TestSpansBodyNeverRead(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t)
	p, _, _ := s.instrumented(t)
	ctx, caller := s.parent(t)
	defer caller.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/large", nil)
	require.NoError(t, err)
	resp, err := p.Client().Do(req)
	require.NoError(t, err)

	spans := under(s.spans.GetSpans(), caller.SpanContext())
	require.ElementsMatch(t, []string{"HTTP wait_for_connection " + strings.TrimPrefix(srv.URL(), "http://"),
		"HTTP write_request", "HTTP wait_for_response"}, names(spans))

	require.NoError(t, resp.Body.Close())
	body := one(t, under(s.spans.GetSpans(), caller.SpanContext()), "HTTP read_response_body")
	v, _ := attr(body, "connaudit.body.closed_early")
	require.Equal(t, "true", v)
	_, sized := attr(body, "http.response.body.size")
	require.False(t, sized)
}

// TestSpansLateHooks cancels a request in its TLS handshake, which the
// Transport goes on with in the background until its timeout: the
// request's spans end when it ended, the handshake's with the request's
// error, and the handshake's late end adds no span.
func TestSpansLateHooks(t *testing.T) {
	s := newSDKs(t)
	stall, err := faultserver.NewTLSStall()
	require.NoError(t, err)
	defer stall.Close()
	// Cancel once the handshake started.
	started := make(chan struct{})
	var once sync.Once
	signal := eventFunc(func(_ *httptrace.Timeline, ev httptrace.Event) {
		if ev.Kind == "tls-start" {
			once.Do(func() { close(started) })
		}
	})
	s.extra = signal
	p, col, _ := s.instrumented(t, pool.TLSHandshakeTimeout(100*time.Millisecond))

	ctx, caller := s.parent(t)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-started:
		case <-ctx.Done():
		}
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, stall.URL(), nil)
	require.NoError(t, err)
	_, err = p.Client().Do(req)
	require.Error(t, err)
	caller.End()

	require.NoError(t, col.Wait(bounded(t), func(_ []*httptrace.Timeline, late []httptrace.LateEvent) bool {
		for _, l := range late {
			if l.Event.Kind == "tls-done" {
				return true
			}
		}
		return false
	}))
	tl := col.Timelines()[0]
	require.EqualValues(t, "canceled", tl.Outcome.Class)
	require.EqualValues(t, "tls", tl.Outcome.Stage)

	spans := s.spans.GetSpans()
	wait := one(t, under(spans, caller.SpanContext()), "HTTP wait_for_connection")
	dial := under(spans, wait.SpanContext)
	handshake := one(t, dial, "TLS client handshake")
	require.Equal(t, codes.Error, handshake.Status.Code)
	v, _ := attr(handshake, "error.type")
	require.Equal(t, "canceled", v)
	require.Equal(t, tl.Start.Add(tl.Timings().Total), handshake.EndTime)
	require.Equal(t, codes.Unset, wait.Status.Code)
	require.Len(t, spans, 1+len(dial)+1, "the caller, the wait and the dial: %v", names(spans))

	// Nothing more once the late events are in.
	require.NoError(t, p.Quiesce(bounded(t)))
	require.Len(t, s.spans.GetSpans(), len(spans))
}

// TestSpansSecrets checks that no span carries a URL's user, password or
// query values, nor the request's credentials, not even when a server
// quotes them in a broken reply that ends the request with an error.
func TestSpansSecrets(t *testing.T) {
	const (
		user, password, token = "Us3rNameValue", "S3cr3tPassw0rd", "T0kenValue"
		bearer, cookie        = "B3arerValue", "C00kieValue"
	)
	secrets := []string{user, password, token, bearer, cookie, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	hostile := brokenReply(t, "Bearer "+bearer+" id="+cookie+"\r\n\r\n")
	srv := newFaultServer(t)

	s := newSDKs(t)
	p, _, _ := s.instrumented(t)
	ctx, caller := s.parent(t)
	for _, base := range []string{srv.URL(), hostile} {
		raw := strings.Replace(base, "://", "://"+user+":"+password+"@", 1) + "/ok?token=" + token
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Cookie", "id="+cookie)
		resp, err := p.Client().Do(req)
		if base == hostile {
			require.Error(t, err)
			require.Contains(t, err.Error(), bearer, "the server quoted the secret")
			continue
		}
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	caller.End()

	spans := s.spans.GetSpans()
	failed := 0
	for _, sp := range spans {
		text := fmt.Sprint(sp.Name, sp.Attributes, sp.Status, sp.Events, sp.Links)
		for _, secret := range secrets {
			require.NotContains(t, text, secret, sp.Name)
		}
		if sp.Status.Code == codes.Error {
			failed++
			require.NotEmpty(t, sp.Status.Description)
		}
	}
	require.Equal(t, 1, failed, "the broken reply's stage")
}

// TestSpansNeedSampledCaller checks that a request with no span in its
// context, or an unsampled one, gets no spans, and its metrics all the
// same.
func TestSpansNeedSampledCaller(t *testing.T) {
	s := newSDKs(t)
	srv := newFaultServer(t)
	p, _, _ := s.instrumented(t)
	ctx := bounded(t)
	do(t, ctx, p, srv.URL()+"/ok", -1)
	unsampled := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
	}))
	do(t, unsampled, p, srv.URL()+"/ok", -1)
	require.Empty(t, s.spans.GetSpans())
	n, _ := hist(t, find(t, s.collect(t), "http.client.request.duration"))
	require.EqualValues(t, 2, n)
}

// eventFunc is an event observer that calls itself for every event.
type eventFunc func(tl *httptrace.Timeline, ev httptrace.Event)

func (eventFunc) Observe(*httptrace.Timeline) {}

func (f eventFunc) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) { f(tl, ev) }

// brokenReply starts a loopback server that reads each request's head and
// answers with raw, which is not HTTP, then closes the connection. It
// returns the server's URL.
func brokenReply(t *testing.T, raw string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound, not a synchronisation
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, raw)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
