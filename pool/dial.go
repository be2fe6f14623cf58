package pool

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// dialer wraps dial so that every connection is tracked. With
// tlsHandshake the Transport runs a TLS handshake after the dial for https
// requests (DialContext); without it the dial returns a finished TLS
// connection (DialTLSContext).
func (p *Pool) dialer(dial func(context.Context, string, string) (net.Conn, error), tlsHandshake bool) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var tlID uint64
		if d := hook.DialFrom(ctx); d != nil {
			tlID = d.TimelineID()
			ctx = d.DialTrace(ctx)
		}
		now := time.Now()
		p.mu.Lock()
		p.nextConn++
		h := p.hostLocked(addr)
		c := &connState{Conn: Conn{ID: p.nextConn, Host: addr, DialedAt: now, DialedFor: tlID}, io: new(connIO), hc: h}
		if r := p.reqs.get(tlID); r != nil {
			c.Scheme = r.u.Scheme
		}
		c.setState(vocab.StateDialing, stampOf(now))
		p.conns[c.ID] = c
		// Whether the Transport handshakes after this dial is known from
		// the request, looked up now: the request may be cancelled and
		// forgotten while the dial goes on in the background.
		handshake := tlsHandshake && p.httpsLocked(tlID)
		h.dials++
		h.dialing++
		p.changes.Signal()
		p.mu.Unlock()

		nc, err := dial(ctx, network, addr)

		now = time.Now()
		defer p.deliverOpened()
		p.mu.Lock()
		defer p.mu.Unlock()
		defer p.changes.Signal()
		h.dialing--
		p.forgetConnLocked(c)
		if err != nil {
			if nc != nil {
				nc.Close()
			}
			c.DialError = err.Error()
			// The Transport dials under a context of its own, apart from
			// the request's: it ends only when the Transport abandons
			// the dial.
			c.Abandoned = ctx.Err() != nil
			c.setState(vocab.StateFailed, stampOf(now))
			h.dialErrors++
			p.rememberLocked(c)
			return nil, err
		}
		c.Local, c.Remote = nc.LocalAddr().String(), nc.RemoteAddr().String()
		p.conns[c.ID] = c
		if handshake || (tlsHandshake && p.httpsLocked(tlID)) {
			// The Transport handshakes next; the connection opens when
			// that request's timeline reports the handshake done.
			c.setState(vocab.StateHandshake, stampOf(now))
			c.dialCtx = ctx
			c.tls = true
			p.waitTLSLocked(tlID, c)
			h.dialing++
		} else {
			c.Proto = p.dialedProto(nc, tlsHandshake)
			p.openLocked(c, h, stampOf(now))
		}
		tc := &trackedConn{Conn: nc, p: p, c: c, io: c.io}
		if c.tls {
			tc.records = new(recordReader)
		}
		return tc, nil
	}
}

// httpsLocked reports whether the request of timeline id, if still known,
// is an https request.
func (p *Pool) httpsLocked(id uint64) bool {
	r := p.reqs.get(id)
	return r != nil && r.u.Scheme == "https"
}

// dialedProto returns the protocol a connection dialed and opened at once
// is for: with tlsHandshake, a TCP connection over which the Transport
// speaks HTTP/1.1 (unless it may speak HTTP/2 without TLS); else a
// connection DialTLSContext returned, its handshake done, over which it
// speaks what was negotiated. "" when not known before a response.
func (p *Pool) dialedProto(nc net.Conn, tlsHandshake bool) string {
	if tlsHandshake {
		if pr := p.tr.Protocols; pr != nil && pr.UnencryptedHTTP2() {
			return ""
		}
		return "HTTP/1.1"
	}
	if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return "h2"
		}
		return "HTTP/1.1"
	}
	return ""
}
