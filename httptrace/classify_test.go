package httptrace_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	stdtrace "net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/connaudit/connaudit/internal/vocab"
)

// failure is how a request failed: the error the caller saw (from RoundTrip
// or from Body.Read) and the request's timeline.
type failure struct {
	err error
	tl  *httptrace.Timeline
}

// failRoundTrip sends req and expects RoundTrip to fail.
func failRoundTrip(t *testing.T, tr *httptrace.Transport, c *httptrace.Collector, req *http.Request) failure {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("request succeeded with status %d", resp.StatusCode)
	}
	return failure{err, only(t, c)}
}

// failBody sends req, expects a response, and expects reading its body to fail.
func failBody(t *testing.T, tr *httptrace.Transport, c *httptrace.Collector, req *http.Request) failure {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err)
	resp.Body.Close()
	return failure{err, only(t, c)}
}

// holdOnlyConn sends a request to path on a MaxConnsPerHost=1 transport and
// returns once its handler was entered: the transport's one connection is
// busy until the test ends.
func holdOnlyConn(t *testing.T, tr *httptrace.Transport, url string, g *gate) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() {
		g.open()
		<-done
	})
	waitFor(t, g.entered, "the handler holding the only connection")
}

// cancelOn returns a context cancelled as soon as the hook picked by set
// fires for the request made with it.
func cancelOn(t *testing.T, set func(ct *stdtrace.ClientTrace, fire func())) context.Context {
	ctx, cancel := context.WithCancel(guardCtx(t))
	t.Cleanup(cancel)
	ct := &stdtrace.ClientTrace{}
	set(ct, cancel)
	return stdtrace.WithClientTrace(ctx, ct)
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "connaudit test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// goAwayServer is an HTTP/2 server, built from x/net/http2 frames, that
// answers the first request with GOAWAY(ENHANCE_YOUR_CALM) naming that
// stream as processed, then closes the connection. net/http's server has no
// way to do that.
func goAwayServer(t *testing.T) (string, *x509.CertPool) {
	cert, pool := selfSigned(t)
	ln := rawServer(t, func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		defer tc.Close()
		if tc.Handshake() != nil {
			return
		}
		testserver.ServeH2(tc, func(fr *http2.Framer, f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				return true
			}
			fr.WriteGoAway(h.StreamID, http2.ErrCodeEnhanceYourCalm, []byte("calm down"))
			// Half-close so the client reads GOAWAY then EOF (a close
			// with unread input would reset), then wait for its close.
			tc.CloseWrite()
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, tc)
			return false
		})
	})
	return ln.Addr().String(), pool
}

// fullAcceptQueue returns the address of a listener whose accept queue is
// full: a connect to it hangs until the dialer's timeout.
func fullAcceptQueue(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	sc, err := ln.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var lerr error
	require.NoError(t, sc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }))
	require.NoError(t, lerr)
	addr := ln.Addr().String()
	// Fill the queue (never accepted): stop at the first connect that hangs.
	full := false
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 2*short)
		if err != nil {
			full = true
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	require.True(t, full, "the accept queue never filled")
	return addr
}

// stalledBody is a request body that produces nothing until ctx ends.
type stalledBody struct{ ctx context.Context }

func (b stalledBody) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, context.Cause(b.ctx)
}

type classCase struct {
	name  string
	class httptrace.Class
	stage httptrace.Stage // "" when the recorder has no meaningful stage
	run   func(t *testing.T) failure
}

// rawClass is what Classify says of the caller's error alone, for the cases
// where only the recorder knows better. (HTTP/2 reports the watchdog's
// cancel as plain "context canceled", without its cause; the body wrapper
// adds it to the error the caller reads.)
var rawClass = map[string]httptrace.Class{}

var classCases = []classCase{
	{"connect refused", vocab.ClassConnectRefused, vocab.StageConnect, func(t *testing.T) failure {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		tr, c := traced(t, newBase(t, nil), nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "http://"+addr+"/", nil))
	}},
	{"connect timeout", vocab.ClassConnectTimeout, vocab.StageConnect, func(t *testing.T) failure {
		addr := fullAcceptQueue(t)
		base := newBase(t, &http.Transport{DialContext: (&net.Dialer{Timeout: short}).DialContext})
		tr, c := traced(t, base, nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "http://"+addr+"/", nil))
	}},
	{"connect other", vocab.ClassConnect, vocab.StageConnect, func(t *testing.T) failure {
		missing := filepath.Join(t.TempDir(), "missing.sock")
		base := newBase(t, &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", missing)
		}})
		tr, c := traced(t, base, nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "http://127.0.0.1/", nil))
	}},
	{"dns", vocab.ClassDNS, vocab.StageDNS, func(t *testing.T) failure {
		res, dns := startDNS(t, nil) // NXDOMAIN for every name
		base := newBase(t, &http.Transport{DialContext: (&net.Dialer{Resolver: res}).DialContext})
		tr, c := traced(t, base, nil)
		f := failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "http://nx.connaudit.test/", nil))
		assert.Positive(t, dns.queries.Load(), "the lookup went to the loopback DNS server")
		var dnsErr *net.DNSError
		if assert.ErrorAs(t, f.err, &dnsErr) {
			assert.True(t, dnsErr.IsNotFound)
		}
		assert.Equal(t, "nx.connaudit.test", f.tl.DNS.Host)
		assert.Error(t, f.tl.DNS.Err)
		requireCounts(t, f.tl, map[httptrace.Kind]int{vocab.KindDNSStart: 1, vocab.KindDNSDone: 1, vocab.KindConnectStart: 0})
		return f
	}},
	{"tls handshake timeout", vocab.ClassTLSHandshakeTimeout, vocab.StageTLS, func(t *testing.T) failure {
		silent := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // accepts, never answers
		base := newBase(t, &http.Transport{TLSHandshakeTimeout: short})
		tr, c := traced(t, base, nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "https://"+silent.Addr().String()+"/", nil))
	}},
	{"tls untrusted certificate", vocab.ClassTLS, vocab.StageTLS, func(t *testing.T) failure {
		srv := startTLSServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), false)
		base := newBase(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}})
		tr, c := traced(t, base, nil)
		f := failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
		var cv *tls.CertificateVerificationError
		assert.ErrorAs(t, f.err, &cv)
		assert.True(t, f.tl.TLS.Done)
		assert.Error(t, f.tl.TLS.Err)
		return f
	}},
	{"response header timeout", vocab.ClassResponseHeaderTimeout, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.hold(r) }))
		base := newBase(t, &http.Transport{ResponseHeaderTimeout: short})
		tr, c := traced(t, base, nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
	}},
	{"deadline awaiting headers", vocab.ClassDeadline, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.hold(r) }))
		tr, c := traced(t, newBase(t, nil), nil)
		ctx, cancel := context.WithTimeout(guardCtx(t), short)
		defer cancel()
		f := failRoundTrip(t, tr, c, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
		waitFor(t, g.entered, "the handler") // the server did see the request
		return f
	}},
	{"deadline waiting for the pool", vocab.ClassDeadline, vocab.StagePoolWait, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				g.hold(r)
			}
		}))
		tr, c := traced(t, newBase(t, &http.Transport{MaxConnsPerHost: 1}), nil)
		holdOnlyConn(t, tr, srv.URL+"/hold", g)
		ctx, cancel := context.WithTimeout(guardCtx(t), short)
		defer cancel()
		return failRoundTrip(t, tr, c, newRequest(t, ctx, http.MethodGet, srv.URL+"/wait", nil))
	}},
	{"canceled awaiting headers", vocab.ClassCanceled, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.hold(r) }))
		tr, c := traced(t, newBase(t, nil), nil)
		ctx, cancel := context.WithCancel(guardCtx(t))
		defer cancel()
		go func() {
			<-g.entered
			cancel()
		}()
		return failRoundTrip(t, tr, c, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
	}},
	{"canceled waiting for the pool", vocab.ClassCanceled, vocab.StagePoolWait, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				g.hold(r)
			}
		}))
		tr, c := traced(t, newBase(t, &http.Transport{MaxConnsPerHost: 1}), nil)
		holdOnlyConn(t, tr, srv.URL+"/hold", g)
		ctx := cancelOn(t, func(ct *stdtrace.ClientTrace, fire func()) { ct.GetConn = func(string) { fire() } })
		f := failRoundTrip(t, tr, c, newRequest(t, ctx, http.MethodGet, srv.URL+"/wait", nil))
		requireCounts(t, f.tl, map[httptrace.Kind]int{vocab.KindGetConn: 1, vocab.KindGotConn: 0})
		return f
	}},
	{"canceled writing the request", vocab.ClassCanceled, vocab.StageWrite, func(t *testing.T) failure {
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
		tr, c := traced(t, newBase(t, nil), nil)
		ctx := cancelOn(t, func(ct *stdtrace.ClientTrace, fire func()) { ct.WroteHeaders = fire })
		// A body that comes only when the request is cancelled: net/http's
		// RoundTrip waits for its write loop, so a body Read that ignores
		// cancellation would hang the cancelled request.
		req := newRequest(t, ctx, http.MethodPost, srv.URL, stalledBody{ctx})
		req.ContentLength = 10
		f := failRoundTrip(t, tr, c, req)
		// net/http waits for its write loop, so the failed write is reported.
		requireCounts(t, f.tl, map[httptrace.Kind]int{vocab.KindWroteHeaders: 1, vocab.KindWroteRequest: 1})
		if e, ok := f.tl.Last(vocab.KindWroteRequest); assert.True(t, ok) {
			assert.Error(t, e.Err)
		}
		return f
	}},
	{"server closed before responding", vocab.ClassServerClosed, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		tr, c := traced(t, newBase(t, nil), nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
	}},
	{"reset", vocab.ClassReset, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		}))
		tr, c := traced(t, newBase(t, nil), nil)
		f := failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
		assert.ErrorIs(t, f.err, syscall.ECONNRESET)
		return f
	}},
	{"protocol", vocab.ClassProtocol, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		garbage := rawServer(t, func(c net.Conn) {
			if _, err := readRequestHead(c); err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			io.Copy(io.Discard, c) // until the client hangs up
		})
		tr, c := traced(t, newBase(t, nil), nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "http://"+garbage.Addr().String()+"/", nil))
	}},
	{"body truncated", vocab.ClassBodyTruncated, vocab.StageBody, func(t *testing.T) failure {
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("x", 10))
			bw.Flush()
		}))
		tr, c := traced(t, newBase(t, nil), nil)
		f := failBody(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
		assert.ErrorIs(t, f.err, io.ErrUnexpectedEOF)
		assert.Equal(t, int64(10), f.tl.BodyBytes)
		assert.Equal(t, 200, f.tl.Outcome.Status)
		return f
	}},
	{"body idle timeout", vocab.ClassBodyIdleTimeout, vocab.StageBody, func(t *testing.T) failure {
		g := newGate(t)
		srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 50))
			w.(http.Flusher).Flush()
			g.hold(r) // half sent, then a stall
		}))
		tr, c := traced(t, newBase(t, nil), nil, httptrace.BodyIdleTimeout(short))
		f := failBody(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
		assert.ErrorIs(t, f.err, httptrace.ErrBodyIdleTimeout)
		assert.Equal(t, int64(50), f.tl.BodyBytes)
		return f
	}},
	{"http2 body idle timeout", vocab.ClassBodyIdleTimeout, vocab.StageBody, func(t *testing.T) failure {
		g := newGate(t)
		srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 50))
			w.(http.Flusher).Flush()
			g.hold(r)
		}), true)
		base := newBase(t, &http.Transport{TLSClientConfig: trust(srv), ForceAttemptHTTP2: true})
		tr, c := traced(t, base, nil, httptrace.BodyIdleTimeout(short))
		f := failBody(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
		assert.Equal(t, "HTTP/2.0", f.tl.Proto)
		assert.Equal(t, int64(50), f.tl.BodyBytes)
		assert.ErrorIs(t, f.err, httptrace.ErrBodyIdleTimeout, "the caller's Read says why, as over HTTP/1")
		return f
	}},
	{"http2 stream reset", vocab.ClassStreamReset, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		srv := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM(INTERNAL_ERROR)
		}), true)
		base := newBase(t, &http.Transport{TLSClientConfig: trust(srv), ForceAttemptHTTP2: true})
		tr, c := traced(t, base, nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, srv.URL, nil))
	}},
	{"http2 goaway", vocab.ClassGoAway, vocab.StageAwaitHeaders, func(t *testing.T) failure {
		addr, pool := goAwayServer(t)
		base := newBase(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true})
		tr, c := traced(t, base, nil)
		f := failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "https://"+addr+"/", nil))
		assert.Equal(t, "h2", f.tl.TLS.ALPN)
		return f
	}},
	{"other error", vocab.ClassError, "", func(t *testing.T) failure {
		tr, c := traced(t, newBase(t, nil), nil)
		return failRoundTrip(t, tr, c, newRequest(t, guardCtx(t), http.MethodGet, "ftp://127.0.0.1/", nil))
	}},
}

// TestClassifyRealErrors produces each failure for real on loopback and
// checks the class and stage of the timeline's outcome, and that Classify
// alone gives the same class for the error the caller saw.
func TestClassifyRealErrors(t *testing.T) {
	for _, tc := range classCases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.run(t)
			require.Error(t, f.err)
			tl := f.tl
			assert.Equal(t, tc.class, tl.Outcome.Class, "error: %v", f.err)
			if tc.stage != "" {
				assert.Equal(t, tc.stage, tl.Outcome.Stage, "error: %v", f.err)
			}
			assert.True(t, tl.Finished)
			assert.Equal(t, 1, tl.Count(vocab.KindDone), "%v", kindsOf(tl))
			assert.Equal(t, len(tl.Events)-1, index(tl, vocab.KindDone, -1))
			if e, ok := tl.Last(vocab.KindDone); assert.True(t, ok) {
				assert.Error(t, e.Err)
			}
			assert.Equal(t, f.err.Error(), tl.Outcome.Err.Error(), "the outcome keeps the error the caller saw")
			raw := tc.class
			if c, ok := rawClass[tc.name]; ok {
				raw = c
			}
			assert.Equal(t, raw, httptrace.Classify(f.err, tl.Outcome.Stage), "Classify(%q)", f.err)
			j := jsonOf(t, tl)
			assert.Equal(t, tc.class, j.Outcome.Class)
			assert.NotEmpty(t, j.Outcome.Error)
		})
	}
}

// TestClassifyUnit covers what the loopback cases cannot: errors net/http
// produces only in races, and the precedence rules.
func TestClassifyUnit(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		err   error
		stage httptrace.Stage
		want  httptrace.Class
	}{
		{nil, vocab.StageBody, vocab.ClassOK},
		{timeout, vocab.StageAwaitHeaders, vocab.ClassTimeout},
		{timeout, vocab.StageConnect, vocab.ClassConnectTimeout},
		{timeout, vocab.StageTLS, vocab.ClassTLSHandshakeTimeout},
		{dialTimeout, vocab.StagePoolWait, vocab.ClassConnectTimeout},
		{&net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, vocab.StageConnect, vocab.ClassConnectTimeout},
		{&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, vocab.StageWrite, vocab.ClassReset},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNABORTED}, vocab.StageAwaitHeaders, vocab.ClassReset},
		{io.ErrUnexpectedEOF, vocab.StageAwaitHeaders, vocab.ClassServerClosed},
		{io.ErrUnexpectedEOF, vocab.StageBody, vocab.ClassBodyTruncated},
		{errors.New("http: server closed idle connection"), vocab.StageAwaitHeaders, vocab.ClassServerClosed},
		{fmt.Errorf("wrapped: %w", httptrace.ErrBodyIdleTimeout), vocab.StageBody, vocab.ClassBodyIdleTimeout},
		{fmt.Errorf("wrapped: %w", context.Canceled), vocab.StagePoolWait, vocab.ClassCanceled},
		{errors.New("http2: timeout awaiting response headers"), vocab.StageAwaitHeaders, vocab.ClassResponseHeaderTimeout},
		{errors.New("net/http: HTTP/1.x transport connection broken: too many transfer encodings"), vocab.StageAwaitHeaders, vocab.ClassProtocol},
		{errors.New("something else"), vocab.StageBody, vocab.ClassError},
		// The bundled http2's ConnectionError: the client closed the
		// connection over the server's protocol violation.
		{errors.New("connection error: FLOW_CONTROL_ERROR"), vocab.StageAwaitHeaders, vocab.ClassProtocol},
		{&url.Error{Op: "Get", URL: "https://h/", Err: errors.New("connection error: PROTOCOL_ERROR")}, vocab.StageAwaitHeaders, vocab.ClassProtocol},
		{&url.Error{Op: "Get", URL: "https://h/connection error: x", Err: errors.New("boom")}, vocab.StageAwaitHeaders, vocab.ClassError},
		// http.Client's *url.Error quotes the URL, whose text is not the
		// error's.
		{&url.Error{Op: "Get", URL: "http://h/GOAWAY", Err: io.EOF}, vocab.StageAwaitHeaders, vocab.ClassServerClosed},
		{&url.Error{Op: "Get", URL: "http://h/TLS handshake timeout", Err: syscall.ECONNRESET}, vocab.StageAwaitHeaders, vocab.ClassReset},
		{&url.Error{Op: "Get", URL: "http://h/timeout awaiting response headers", Err: context.DeadlineExceeded}, vocab.StageAwaitHeaders, vocab.ClassDeadline},
		{&url.Error{Op: "Get", URL: "http://h/invalid", Err: errors.New("boom")}, vocab.StageAwaitHeaders, vocab.ClassError},
		{&url.Error{Op: "Get", URL: "http://h/", Err: errors.New("http2: timeout awaiting response headers")}, vocab.StageAwaitHeaders, vocab.ClassResponseHeaderTimeout},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, httptrace.Classify(c.err, c.stage), "Classify(%v, %s)", c.err, c.stage)
	}

	// ClassifyContext: the request's own context decides first.
	someErr := errors.New("net/http: request canceled")
	deadline, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	assert.Equal(t, vocab.ClassDeadline, vocab.ClassifyContext(deadline, someErr, vocab.StageBody))
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	assert.Equal(t, vocab.ClassCanceled, vocab.ClassifyContext(canceled, someErr, vocab.StageBody))
	idle, cancel3 := context.WithCancelCause(context.Background())
	cancel3(httptrace.ErrBodyIdleTimeout)
	assert.Equal(t, vocab.ClassBodyIdleTimeout, vocab.ClassifyContext(idle, someErr, vocab.StageBody))
	assert.Equal(t, vocab.ClassOK, vocab.ClassifyContext(canceled, nil, vocab.StageBody))
	// Cancelled by a timer of the caller's, with a deadline as the cause;
	// any other cause is a cancellation.
	timedOut, cancel4 := context.WithCancelCause(context.Background())
	cancel4(fmt.Errorf("request timeout: %w", context.DeadlineExceeded))
	assert.Equal(t, vocab.ClassDeadline, vocab.ClassifyContext(timedOut, someErr, vocab.StageAwaitHeaders))
	other, cancel5 := context.WithCancelCause(context.Background())
	cancel5(errors.New("shutting down"))
	assert.Equal(t, vocab.ClassCanceled, vocab.ClassifyContext(other, someErr, vocab.StageAwaitHeaders))
	assert.Equal(t, vocab.ClassProtocol, vocab.ClassifyContext(context.Background(),
		errors.New(`malformed HTTP response "x"`), vocab.StageAwaitHeaders))
}
