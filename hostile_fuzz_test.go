package connaudit_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hostile"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
)

const (
	// fuzzHostileStall bounds a request to a reply that may stall (the
	// server goes silent, or waits for an HTTP head that a TLS client never
	// sends): the client's deadline ends it.
	fuzzHostileStall = 100 * time.Millisecond
	// fuzzHostileGuard bounds every other request, which must end on the
	// server's FIN or RST long before it.
	fuzzHostileGuard = 5 * time.Second
)

// fuzzHostileReply decodes a fuzz input: the first byte says when the
// server writes (bits 0-1: after the request head, on accept, after the
// first bytes), what it does then (bits 2-3: FIN, RST, stall) and whether
// the client speaks TLS (bit 4); the rest is the reply, written as is.
func fuzzHostileReply(data []byte) hostile.Reply {
	var ctl byte
	if len(data) > 0 {
		ctl, data = data[0], data[1:]
	}
	r := hostile.Reply{Name: "fuzz", Raw: data, HTTPS: ctl&16 != 0}
	r.Wait = []hostile.Wait{hostile.AfterRequest, hostile.OnAccept, hostile.AfterFirstRead,
		hostile.AfterRequest}[ctl&3]
	r.End = []hostile.End{hostile.EndClose, hostile.EndReset, hostile.EndStall,
		hostile.EndClose}[(ctl>>2)&3]
	return r
}

// mayStall reports whether a request to r may end only by the client's
// deadline.
func mayStall(r hostile.Reply) bool {
	return r.End == hostile.EndStall || (r.HTTPS && r.Wait == hostile.AfterRequest)
}

// FuzzHostileReply answers a request, made through a pool and the tracer,
// with arbitrary bytes from a raw TCP server on loopback (the hostile
// server), then a FIN, an RST or silence. Invariants: nothing panics; the
// request ends within its bound, and a reply followed by FIN or RST ends
// it before the bound fires (no hang); the request has exactly one
// timeline, finished with exactly one done event and a declared outcome
// and stage; a response's body bytes are those the caller read; the pool
// accounts for the connection: its check passes, no connection stays
// active, no body open, one dial per connection the server accepted, and
// every connection that was not a failed dial is closed once the pool is.
func FuzzHostileReply(f *testing.F) {
	for _, r := range hostile.Corpus() {
		if len(r.Raw) > 64<<10 {
			continue // the huge ones are in TestHostileServers
		}
		ctl := byte(0)
		switch r.Wait {
		case hostile.OnAccept:
			ctl |= 1
		case hostile.AfterFirstRead:
			ctl |= 2
		}
		switch r.End {
		case hostile.EndReset:
			ctl |= 1 << 2
		case hostile.EndStall:
			ctl |= 2 << 2
		}
		if r.HTTPS {
			ctl |= 16
		}
		f.Add(append([]byte{ctl}, r.Raw...))
	}
	for _, s := range []string{
		"\x00HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"\x00HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA BYTES",
		"\x00HTTP/1.1 204 No Content\r\n\r\n",
		"\x00HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"\x00HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
		"\x00HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil EOF",
		"\x04HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfive!",
		"\x08HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfive!",
		"\x00HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"\x00HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nraw",
		"\x00HTTP/1.0 200 OK\r\n\r\nbody",
		"\x00HTTP/1.1 301 Moved\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
		"\x00HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00",
		"\x00HTTP/2.0 200 OK\r\n\r\n",
		"\x10\x16\x03\x01\x00\x05hello",
		"\x12\x16\x03\x03\x00\x02\x02\x28",
	} {
		f.Add([]byte(s))
	}
	srv, err := hostile.New(hostile.Reply{Name: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	// net/http logs bytes a server sends on an idle connection
	// ("Unsolicited response"), quoting them: noise here.
	out := log.Writer()
	log.SetOutput(io.Discard)
	f.Cleanup(func() { log.SetOutput(out) })

	f.Fuzz(func(t *testing.T, data []byte) {
		reply := fuzzHostileReply(data)
		if err := srv.SetReply(reply); err != nil {
			t.Fatal(err)
		}
		col := &httptrace.Collector{}
		p := newPool(t, col, pool.ConnectTimeout(time.Second), pool.TLSHandshakeTimeout(150*time.Millisecond))
		defer p.Close()
		bound := fuzzHostileGuard
		if mayStall(reply) {
			bound = fuzzHostileStall
		}
		accepted := srv.ConnsAccepted()

		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		// One request, one timeline: redirects are not followed.
		client := &http.Client{Transport: p.RoundTripper(), CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
		var n int64
		resp, err := get(ctx, client, srv.URL()+"/x")
		if err == nil {
			n, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}

		tls := col.Timelines()
		if len(tls) != 1 {
			t.Fatalf("%d timelines for one request", len(tls))
		}
		tl := tls[0]
		if !tl.Finished || tl.Count(vocab.KindDone) != 1 || tl.Outcome.Class == "" || tl.Outcome.Stage == "" {
			t.Fatalf("timeline not finished with exactly one outcome: finished %v, %d done events, outcome %q @%q",
				tl.Finished, tl.Count(vocab.KindDone), tl.Outcome.Class, tl.Outcome.Stage)
		}
		if !mayStall(reply) && (tl.Outcome.Class == vocab.ClassDeadline || ctx.Err() != nil) {
			t.Fatalf("a reply ended by FIN or RST ran into the %v bound: %s @%s: %v", bound, tl.Outcome.Class, tl.Outcome.Stage, tl.Outcome.Err)
		}
		// ok means a response arrived (whatever its status: net/http takes
		// "HTTP/1.1 000" for status 0), though http.Client may still fail
		// the request after it (a redirect whose Location does not parse).
		// A 101 hands the connection to the caller: its bytes are not the
		// tracer's to count.
		if tl.Outcome.Class == vocab.ClassOK && (tl.Count(vocab.KindResponse) != 1 ||
			(tl.Status != http.StatusSwitchingProtocols && tl.BodyBytes != n)) {
			t.Fatalf("ok with %d response events, status %d, error %v, %d body bytes recorded, %d read",
				tl.Count(vocab.KindResponse), tl.Status, err, tl.BodyBytes, n)
		}

		wctx, wcancel := context.WithTimeout(context.Background(), fuzzHostileGuard)
		defer wcancel()
		if err := p.Check(wctx); err != nil {
			t.Fatalf("pool check: %v", err)
		}
		s := p.Stats()
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		// (A dial may fail: a server that resets the connection as soon as
		// it accepted it makes the client's connect report ECONNRESET.)
		if s.Active != 0 || s.OpenBodies != 0 || s.InFlight != 0 || s.Requests != 1 {
			t.Fatalf("pool not at rest after one request: %+v", s)
		}
		if got := srv.ConnsAccepted() - accepted; got != s.Dials {
			t.Fatalf("the server accepted %d connections, the pool dialed %d", got, s.Dials)
		}
		p.Close()
		if err := p.WaitFor(wctx, func(s pool.Stats) bool { return s.Open == 0 && s.Dialing == 0 }); err != nil {
			t.Fatalf("connections still open after Close: %+v: %v", p.Stats(), err)
		}
		if s := p.Stats(); s.Closed+s.DialErrors != s.Dials {
			t.Fatalf("%d dials but %d closed and %d failed", s.Dials, s.Closed, s.DialErrors)
		}
	})
}
