package pool

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
)

// activeReqsLocked returns the requests c serves, finished or not.
func (p *Pool) activeReqsLocked(c *connState) []*request {
	var out []*request
	for id := range c.active.all() {
		if r := p.reqs.get(id); r != nil {
			out = append(out, r)
		} else if c.last != nil && c.last.id == id {
			out = append(out, c.last)
		}
	}
	return out
}

// closeReasonLocked says who closed c, which was in state prev, and why,
// from the evidence the pool has, strongest first: what a response or the
// client's own protocol check asked for, what the server sent (a read
// error, a TLS alert), an HTTP/2 connection's own closes, then what is
// left for the state it was in. It may set c's CloseDetail, and its
// closeReq to the request whose end may refine the reason.
func (p *Pool) closeReasonLocked(c *connState, prev ConnState) (Closer, CloseReason) {
	reqs := p.activeReqsLocked(c)
	if by, reason, ok := p.askedCloseLocked(c, reqs); ok {
		return by, reason
	}
	if by, reason, ok := serverClose(c, prev); ok {
		return by, reason
	}
	if c.readErr != nil && prev == vocab.StateActive {
		// Any other read failure: the client gives the connection up.
		c.CloseDetail = c.readErr.Error()
	}
	if c.h2 && prev != vocab.StateHandshake && p.closingIdle == 0 && c.putIdleErr == nil {
		if by, reason, ok := p.h2CloseLocked(c, prev, reqs); ok {
			return by, reason
		}
	}
	switch prev {
	case vocab.StateHandshake:
		if c.Abandoned {
			return vocab.ClosedByClient, vocab.ReasonHandshakeAbandon
		}
		return vocab.ClosedByClient, vocab.ReasonHandshakeFailed
	case vocab.StateIdle:
		return vocab.ClosedByClient, p.idleCloseLocked(c)
	}
	return p.activeCloseLocked(c, prev, reqs)
}

// askedCloseLocked names a close that a response asked for, whatever came
// first (unless the client asked first: keep-alives off), or that the
// client made over what the server sent (an HTTP/2 connection error, a
// malformed response).
func (p *Pool) askedCloseLocked(c *connState, reqs []*request) (Closer, CloseReason, bool) {
	for _, r := range reqs {
		if r.connClose && !p.tr.DisableKeepAlives {
			return vocab.ClosedByServer, connCloseReason(r.proto), true
		}
	}
	if c.readErr == nil && (c.protoErr || slices.ContainsFunc(reqs, func(r *request) bool { return r.class == vocab.ClassProtocol })) {
		return vocab.ClosedByClient, vocab.ReasonProtocolError, true
	}
	return "", "", false
}

// serverClose names a close the server made, by what c read: an EOF or a
// reset, or over TLS the alert that begins the server's close.
func serverClose(c *connState, prev ConnState) (Closer, CloseReason, bool) {
	if reason, ok := serverSide(c.readErr); ok {
		// Idle or not when the server closed, not when the client
		// got round to closing: an HTTP/2 stream that the close killed
		// ends before the connection does.
		if c.readErrState == vocab.StateIdle && reason == vocab.ReasonServerEOF {
			return vocab.ClosedByServer, vocab.ReasonServerClosedIdle, true
		}
		return vocab.ClosedByServer, reason, true
	}
	if alert, idle := c.lastAlert(); alert && c.readErr == nil && !c.h2 && c.tls && prev != vocab.StateHandshake {
		// Over TLS the server's close begins with its close_notify, on
		// which crypto/tls reports EOF to net/http and reads no further:
		// the FIN that would have been the pool's read error stays
		// unread. The last record read was an alert.
		switch {
		case idle && prev == vocab.StateIdle:
			c.CloseDetail = "its TLS alert (close_notify) read while the connection was idle"
			return vocab.ClosedByServer, vocab.ReasonServerClosedIdle, true
		case !idle && prev == vocab.StateActive:
			c.CloseDetail = "its TLS alert (close_notify) read during a request"
			return vocab.ClosedByServer, vocab.ReasonServerEOF, true
		}
	}
	return "", "", false
}

// h2CloseLocked names a close of the HTTP/2 connection c, open in state
// prev, that net/http makes by itself: its idle timer, a connection dialed
// beside another and never used, a single-use connection's close after its
// stream (keep-alives off), or the client's close after the server's
// GOAWAY (inferred: the frame is not visible here).
func (p *Pool) h2CloseLocked(c *connState, prev ConnState, reqs []*request) (Closer, CloseReason, bool) {
	t := p.tr.IdleConnTimeout
	if d, ok := c.io.sinceRead(time.Since(ioEpoch), t/8); ok && timedOut(d, t) {
		// Nothing came in for the idle timeout: net/http's idle timer
		// closed it. That timer starts when the last stream ends
		// (its END_STREAM read), not when its body is closed, so a
		// connection whose body the caller still holds, and which the
		// pool counts active, times out too.
		return vocab.ClosedByClient, vocab.ReasonIdleTimeout, true
	}
	idleTimedOut := prev == vocab.StateIdle && timedOut(time.Since(c.idleSince.time()), t)
	if prev == vocab.StateIdle && c.Requests == 0 && !idleTimedOut {
		// A connection no request ever used: the Transport dialed
		// more than one at once and keeps one per host for HTTP/2,
		// closing the others as their handshakes end.
		c.CloseDetail = "never used: HTTP/2 takes one connection per host"
		return vocab.ClosedByClient, vocab.ReasonH2Unused, true
	}
	if p.tr.DisableKeepAlives {
		// With keep-alives off, net/http's HTTP/2 client closes the
		// connection itself once its last stream ended, whatever that
		// stream's outcome (closeOnIdle); no GOAWAY is sent. It would
		// have kept it otherwise.
		c.CloseDetail = "DisableKeepAlives: HTTP/2 closes the connection once its last stream ended"
		return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff, true
	}
	if h := p.tr.HTTP2; h != nil && h.SendPingTimeout > 0 {
		// The health check: a PING after SendPingTimeout without a frame
		// read, the connection closed when no answer came within
		// PingTimeout (15s when 0, as net/http has it). Nothing was read
		// for as long: the server did not answer.
		pt := h.PingTimeout
		if pt <= 0 {
			pt = 15 * time.Second
		}
		if d, ok := c.io.sinceRead(time.Since(ioEpoch), 0); ok && timedOut(d, h.SendPingTimeout+pt) {
			c.CloseDetail = fmt.Sprintf("nothing read for %v: a PING sent after SendPingTimeout (%v) went unanswered "+
				"for PingTimeout (%v)", d.Round(time.Millisecond), h.SendPingTimeout, pt)
			return vocab.ClosedByClient, vocab.ReasonPingTimeout, true
		}
	}
	// An HTTP/2 client closes a connection itself once the server
	// sent GOAWAY and its last stream ended. The frame is not visible
	// here (the bytes are encrypted); infer it: the connection was not
	// idle long enough to time out, and no request on it failed.
	for _, r := range reqs {
		if r.class != "" && r.class != vocab.ClassOK {
			return "", "", false
		}
	}
	if idleTimedOut {
		return "", "", false
	}
	return vocab.ClosedByServer, vocab.ReasonServerGoAway, true
}

// idleCloseLocked says why the client closed c, an idle connection, with
// no read error nor alert from the server: the pool's own calls and
// settings, or what net/http does with no hook.
func (p *Pool) idleCloseLocked(c *connState) CloseReason {
	switch {
	case p.closingIdle > 0:
		return vocab.ReasonCloseIdle
	case c.putIdleErr != nil:
		return putIdleReason(c.putIdleErr)
	case p.keepsNone():
		c.CloseDetail = p.keepsNoneDetail()
		return vocab.ReasonKeepAlivesOff
	case timedOut(time.Since(c.idleSince.time()), p.tr.IdleConnTimeout):
		return vocab.ReasonIdleTimeout
	case p.tr.MaxIdleConns > 0 && p.idleOverLocked():
		// net/http closes the least recently used idle connection,
		// with no hook, to keep MaxIdleConns.
		return vocab.ReasonIdlePoolFull
	case !c.h2 && c.readErr == nil && c.Requests == 0 && (c.tls || c.io.read.Load() == c.readAtOpen):
		// A connection no request used, closed with no hook and
		// nothing read from the server since it opened (over TLS,
		// nothing the pool can tell apart from the session tickets
		// that follow the handshake): its dial ended after the
		// request it was made for got another connection, and
		// net/http offered it to the idle pool, which refused it
		// (putOrCloseIdleConn): the host's idle connections were at
		// MaxIdleConnsPerHost, or, after CloseIdleConnections, the
		// Transport keeps none.
		if p.closeIdle {
			c.CloseDetail = "never used: its dial ended after CloseIdleConnections, when the Transport keeps no idle connection"
			return vocab.ReasonCloseIdle
		}
		c.CloseDetail = fmt.Sprintf("never used: the request it was dialed for took another connection, and the idle pool had no room (MaxIdleConnsPerHost %d)",
			p.maxIdlePerHost())
		return vocab.ReasonIdlePoolFull
	case !c.h2 && c.readErr == nil:
		// net/http's HTTP/1 read loop gives an idle connection up, with
		// no hook, when bytes arrive while no response is due
		// ("Unsolicited response received on idle HTTP channel"):
		// bytes after a response's end, or a body to a HEAD request.
		c.CloseDetail = "the server sent bytes when no response was due (after a response's end, or a body to HEAD)"
		return vocab.ReasonProtocolError
	}
	return vocab.ReasonClient
}

// activeCloseLocked says why c, closed while it served reqs (or dialing,
// prev), was closed, once neither a response, the server nor HTTP/2
// explains it: the requests' own ends, the Transport's refusal to keep
// it, or a request the Transport already sends again. A request that
// failed closes the connection whatever the Transport keeps: its end is
// asked before keep-alives are, and a request not yet ended leaves the
// reason to its end (closeReq).
func (p *Pool) activeCloseLocked(c *connState, prev ConnState, reqs []*request) (Closer, CloseReason) {
	for _, r := range reqs {
		if r.early && (r.class == "" || r.class == vocab.ClassOK) {
			return vocab.ClosedByClient, vocab.ReasonEarlyBodyClose
		}
	}
	if c.putIdleErr != nil {
		return vocab.ClosedByClient, putIdleReason(c.putIdleErr)
	}
	for _, r := range reqs {
		if !c.h2 && r.class == "" && r.conn != c && c.readErr == nil {
			// The Transport already sends the request again (see
			// retriedLocked).
			c.CloseDetail = serverClosedBeforeResponse
			return vocab.ClosedByServer, vocab.ReasonServerEOF
		}
	}
	for _, r := range reqs {
		c.closeReq = r.id
		if r.class != "" {
			// The request already ended: its outcome is the detail.
			by, reason := p.requestCloseReason(r, c)
			if reason == vocab.ReasonRequestError {
				c.CloseDetail = string(r.class)
			}
			return by, reason
		}
	}
	if len(reqs) == 0 && p.keepsNone() {
		c.CloseDetail = p.keepsNoneDetail()
		return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff
	}
	if prev == vocab.StateActive {
		return vocab.ClosedByClient, vocab.ReasonRequestError
	}
	return vocab.ClosedByClient, vocab.ReasonClient
}

// requestCloseReason says why the Transport closes c, an HTTP/1
// connection, after request r ended on it. It may set c's CloseDetail.
func (p *Pool) requestCloseReason(r *request, c *connState) (Closer, CloseReason) {
	switch {
	case r.connClose && !p.tr.DisableKeepAlives:
		// With keep-alives off the client asked for the close itself
		// ("Connection: close" on the request), and the server only
		// echoed it.
		return vocab.ClosedByServer, connCloseReason(r.proto)
	case r.early && r.class == vocab.ClassOK:
		return vocab.ClosedByClient, vocab.ReasonEarlyBodyClose
	case p.keepsNone() && r.class == vocab.ClassOK:
		c.CloseDetail = p.keepsNoneDetail()
		return vocab.ClosedByClient, vocab.ReasonKeepAlivesOff
	case r.class == vocab.ClassProtocol:
		return vocab.ClosedByClient, vocab.ReasonProtocolError
	case r.class == vocab.ClassOK:
		// The request succeeded, yet the Transport gave the connection
		// up: it does so when the write goroutine has not reported the
		// request written 50ms after the response was read (net/http's
		// maxWriteWaitBeforeConnReuse), which happens under load.
		return vocab.ClosedByClient, vocab.ReasonClient
	}
	return vocab.ClosedByClient, vocab.ReasonRequestError
}

func connCloseReason(proto string) CloseReason {
	if proto == "HTTP/1.0" {
		return vocab.ReasonHTTP10
	}
	return vocab.ReasonConnectionClose
}

// timedOut reports whether a connection idle for d can have been closed by
// net/http's idle timer, of timeout t. The pool learns that a connection
// went idle a little after the Transport started the timer (the hook runs
// after), hence the slack.
func timedOut(d, t time.Duration) bool {
	return t > 0 && d >= t-t/8
}

// putIdleReason names the PutIdleConn error that made the Transport close
// a connection instead of keeping it idle. net/http's errors here are
// unexported; their texts are stable.
func putIdleReason(err error) CloseReason {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "too many idle"):
		return vocab.ReasonIdlePoolFull
	case strings.Contains(msg, "keep alives disabled") || strings.Contains(msg, "keep-alives"):
		return vocab.ReasonKeepAlivesOff
	case errors.Is(err, errIdleClosed), strings.Contains(msg, "CloseIdleConnections"):
		return vocab.ReasonCloseIdle
	}
	return vocab.ReasonClient
}

var errIdleClosed = errors.New("http: CloseIdleConnections called")

// keepsNone reports whether the Transport keeps no HTTP/1 connection for
// another request: DisableKeepAlives, or a negative MaxIdleConnsPerHost,
// for which net/http refuses every connection offered to its idle pool
// (errKeepAlivesDisabled) and closes it without calling the PutIdleConn
// hook.
func (p *Pool) keepsNone() bool {
	return p.tr.DisableKeepAlives || p.tr.MaxIdleConnsPerHost < 0
}

// keepsNoneDetail names the setting for which the Transport keeps no
// connection ([Pool.keepsNone]).
func (p *Pool) keepsNoneDetail() string {
	if p.tr.DisableKeepAlives {
		return "DisableKeepAlives: one request per connection"
	}
	return fmt.Sprintf("MaxIdleConnsPerHost %d: the Transport keeps no idle connection", p.tr.MaxIdleConnsPerHost)
}

// maxIdlePerHost returns the Transport's effective MaxIdleConnsPerHost.
func (p *Pool) maxIdlePerHost() int {
	if n := p.tr.MaxIdleConnsPerHost; n != 0 {
		return n
	}
	return http.DefaultMaxIdleConnsPerHost
}

// idleOverLocked reports whether the idle connections (the one being
// closed, no longer counted, included) reach http.Transport.MaxIdleConns,
// so that net/http may have closed the least recently used of them.
func (p *Pool) idleOverLocked() bool {
	return p.sumLocked(func(h *counters) int { return h.idle })+1 >= p.tr.MaxIdleConns
}

// h2ConnError reports whether err is an HTTP/2 connection error of the
// bundled http2 (its ConnectionError, unexported: "connection error:
// FLOW_CONTROL_ERROR"), for which the client closes the connection.
func h2ConnError(err error) bool {
	// http.Client's *url.Error quotes the URL, whose text is not the
	// error's.
	for {
		ue, ok := err.(*url.Error)
		if !ok || ue.Err == nil {
			break
		}
		err = ue.Err
	}
	return err != nil && strings.Contains(err.Error(), "connection error: ")
}
