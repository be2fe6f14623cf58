package pool

import (
	"crypto/tls"
	"slices"

	"github.com/connaudit/connaudit/internal/vocab"
)

// tlsWait is what the pool knows of the TLS handshakes the Transport runs
// on the dials of one request. Each handshake reports its end to that
// request's trace (TLSHandshakeDone), which names no connection: while
// one connection is in its handshake the report is that connection's;
// while several are (a request the Transport sent again dialed again, its
// first dial still running), a success is counted and given to a
// connection only once it is known whose it is: the connection serves a
// request (GotConn), or it closes after crypto/tls sent its close_notify
// (which only a finished handshake sends), or each connection in its
// handshake reported success. A failure needs no attribution: the
// Transport closes the connection before it reports the failure.
type tlsWait struct {
	conns   []*connState // in their handshake, in dial order
	ok      int          // successes reported and not yet given to a connection
	alpn    string       // the protocol the successes negotiated, if they agree
	mixed   bool         // they negotiated different protocols
	version uint16       // the TLS version they agree on, or 0
	resumed bool         // the last success resumed a session
	reports int          // successes reported in all
}

// waitTLSLocked records that the Transport handshakes next on c, dialed
// for the request of timeline id.
func (p *Pool) waitTLSLocked(id uint64, c *connState) {
	w := p.pendingTLS[id]
	if w == nil {
		w = &tlsWait{}
		p.pendingTLS[id] = w
	}
	w.conns = append(w.conns, c)
	c.tlsFor = id
}

// tlsDoneLocked records a successful handshake reported on the timeline
// id: the ALPN protocol, the TLS version and whether it resumed a session.
func (p *Pool) tlsDoneLocked(id uint64, alpn string, version uint16, resumed bool, now stamp) {
	w := p.pendingTLS[id]
	if w == nil {
		return
	}
	if w.reports == 0 {
		w.alpn, w.version = alpn, version
	} else {
		if w.alpn != alpn {
			w.alpn, w.mixed = "", true
		}
		if w.version != version {
			w.version = 0
		}
	}
	w.reports++
	w.resumed = resumed
	w.ok++
	p.settleTLSLocked(id, w, now)
}

// settleTLSLocked opens the connections of w, the handshakes of the
// request of timeline id, once each of them is known to have succeeded.
func (p *Pool) settleTLSLocked(id uint64, w *tlsWait, now stamp) {
	if len(w.conns) == 0 {
		delete(p.pendingTLS, id)
		return
	}
	if w.ok < len(w.conns) {
		return
	}
	delete(p.pendingTLS, id)
	one := len(w.conns) == 1
	for _, c := range w.conns {
		c.tlsFor = 0
		if one {
			c.TLSResumed = w.resumed
		}
		p.handshakeDoneLocked(c, w.alpn, w.known(), w.version, now)
	}
}

// known reports whether the protocol of w's handshakes is known: one
// reported success at least, and all agree.
func (w *tlsWait) known() bool { return w.reports > 0 && !w.mixed }

// leaveTLSLocked takes c out of its request's handshakes; succeeded says
// its handshake is known to have succeeded, and so to have been reported.
// It returns the ALPN protocol the request's successful handshakes agree
// on, whether they do (one reported at least), and their TLS version, if
// they agree: those of c's, if it succeeded (the dials of one request are
// to one host with one configuration).
func (p *Pool) leaveTLSLocked(c *connState, succeeded bool, now stamp) (alpn string, known bool, version uint16) {
	id := c.tlsFor
	c.tlsFor = 0
	w := p.pendingTLS[id]
	if w == nil {
		return "", false, 0
	}
	alpn, known, version = w.alpn, w.known(), w.version
	w.conns = slices.DeleteFunc(w.conns, func(x *connState) bool { return x == c })
	if succeeded && w.ok > 0 {
		w.ok--
	}
	p.settleTLSLocked(id, w, now)
	return alpn, known, version
}

// handshakeClosedLocked applies the close of c, still in its handshake for
// the pool, and returns the state to close it from: open (idle) if its
// handshake had finished, which crypto/tls's close_notify shows, else
// the handshake.
func (p *Pool) handshakeClosedLocked(c *connState, now stamp) ConnState {
	finished := c.io.closeNotify.Load()
	alpn, known, version := p.leaveTLSLocked(c, finished, now)
	// A handshake the Transport abandoned ends with its dial's context,
	// which crypto/tls then closes the connection for; one that finished
	// was not abandoned, whatever became of that context since.
	c.Abandoned = !finished && c.dialCtx != nil && c.dialCtx.Err() != nil
	if !finished {
		c.dialCtx = nil
		c.hc.dialing--
		return vocab.StateHandshake
	}
	p.handshakeDoneLocked(c, alpn, known, version, now)
	return vocab.StateIdle
}

// handshakeDoneLocked opens a connection whose TLS handshake finished,
// taken out of its request's handshakes (see tlsWait), which negotiated
// protocol alpn if known.
func (p *Pool) handshakeDoneLocked(c *connState, alpn string, known bool, version uint16, now stamp) {
	h := c.hc
	h.dialing--
	c.dialCtx = nil
	if alpn == "h2" {
		c.setH2()
	} else if known && c.Proto == "" {
		// net/http speaks HTTP/1.1 over TLS unless h2 was negotiated.
		c.Proto = "HTTP/1.1"
	}
	if version != 0 {
		c.TLSVersion = tls.VersionName(version)
	}
	p.openLocked(c, h, now)
}
