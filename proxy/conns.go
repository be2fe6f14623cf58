package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
)

// Who closed a downstream connection, and why.
const (
	closedByClient = "client"
	closedByProxy  = "proxy"

	reasonClientClose     = "client-close"     // the client closed it, idle
	reasonClientInRequest = "client-gave-up"   // the client closed it with a request in flight
	reasonClientReset     = "client-reset"     // the client reset it
	reasonConnectionClose = "connection-close" // the client's request said "Connection: close"
	reasonFault           = "fault"            // a rule's fault (detail: which)
	reasonGuard           = "guard"            // a request held past the guard was cut
	reasonUpstream        = "upstream-error"   // the upstream's response broke off
	reasonShutdown        = "shutdown"         // the proxy stopped
	reasonProxy           = "proxy-close"      // the server closed it otherwise
	// The proxy's own bounds (Bounds): resources, not faults.
	reasonHeaderTimeout  = "header-timeout"   // no whole request header within Bounds.Header
	reasonIdleTimeout    = "idle-timeout"     // idle for Bounds.Idle
	reasonHeaderTooLarge = "header-too-large" // a header past Bounds.HeaderBytes: answered 431
	reasonBadRequest     = "bad-request"      // a request net/http refused otherwise (detail: its answer)
	reasonConnLimit      = "conn-limit"       // accepted past Bounds.Conns
)

// refusalHeaders follow the status line of the answers net/http's server
// writes itself, before it closes the connection, to a request it could
// not read (431 for a header past MaxHeaderBytes, 400, 505…): no response
// a handler writes has them in this order (its headers are sorted).
const refusalHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// listener accounts for every connection it accepts.
type listener struct {
	net.Listener
	p *Proxy
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.p.accepted(c), nil
}

// conn is a downstream connection as the proxy sees it below HTTP: the
// first side to end it is the one that closed it.
type conn struct {
	net.Conn
	rec *connRec
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	r := c.rec
	r.read.Add(int64(n))
	if n > 0 && r.isDark.Load() {
		// Dark: what the client sends is read and dropped, never
		// answered, until the client ends the connection, a bound
		// passes or the proxy stops.
		for err == nil {
			n, err = c.Conn.Read(b)
			r.read.Add(int64(n))
		}
		n = 0
	}
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() && r.bounded.Load() {
			r.boundPassed()
		} else {
			r.peerEnded(err)
		}
	}
	return n, err
}

// SetReadDeadline records whether the deadline net/http sets is one of
// the proxy's bounds (the header's, the idle one's, a TLS handshake's),
// or its way to end a read at once (a time long past), or none.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.rec.bounded.Store(t.After(c.rec.accepted))
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.rec.bounded.Store(t.After(c.rec.accepted))
	return c.Conn.SetDeadline(t)
}

func (c *conn) Write(b []byte) (int, error) {
	if c.rec.isDark.Load() {
		return len(b), nil // dark: nothing reaches the client
	}
	if len(b) > len("HTTP/1.1 ") && b[0] == 'H' && bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		c.rec.refusing(b)
	}
	return c.Conn.Write(b)
}

func (c *conn) Close() error {
	c.rec.proxyClosing(reasonProxy, "")
	err := c.Conn.Close()
	c.rec.ended()
	return err
}

// connRec is the record of one downstream connection, guarded by mu.
type connRec struct {
	p      *Proxy
	raw    net.Conn // below TLS
	closed chan struct{}

	mu         sync.Mutex
	id         uint64
	remote     string
	client     string
	proto      string
	accepted   time.Time
	closedAt   time.Time
	closedBy   string
	reason     string
	detail     string
	requests   int
	active     int
	lastEnd    time.Time     // when it last went idle
	maxIdle    time.Duration // the longest idle gap, that one ended in a close or in the dark with them
	reqIdle    time.Duration // the longest idle gap a request followed
	gaps       int           // idle gaps a request followed
	faults     []string
	isDark     atomic.Bool // read without mu, at every read and write
	askedClose bool
	idleGen    uint64
	idleTimer  *time.Timer
	isClosed   bool
	read       atomic.Int64 // bytes read from the client
	readAtEnd  int64        // read when the last request ended
	bounded    atomic.Bool  // the read deadline in force is a bound's
	firstReq   time.Time
	srv        *http.Server // serves it alone: its Shutdown is a GOAWAY on HTTP/2
	idleRule   *rule        // the connection rule that took it, if any
	quiet      *sync.Cond   // signalled when active falls to 0
}

// peerEnded records the client's end of the connection: a read that
// failed before the proxy closed it.
func (r *connRec) peerEnded(err error) {
	// A deadline net/http set ends a read at every request (its
	// background read): the direct assertion keeps that path cheap.
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return
	}
	var ne net.Error
	if errors.Is(err, net.ErrClosed) || (errors.As(err, &ne) && ne.Timeout()) {
		return // the proxy's own close, or a deadline net/http set
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closedBy != "" {
		return
	}
	r.closedBy = closedByClient
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		r.reason = reasonClientReset
	case r.askedClose:
		r.reason = reasonConnectionClose
	case r.active > 0 || (r.isDark.Load() && r.read.Load() > r.readAtEnd):
		r.reason = reasonClientInRequest
	case errors.Is(err, io.EOF):
		r.reason = reasonClientClose
	default:
		r.closedBy, r.reason = closedByClient, reasonClientClose
		r.detail = err.Error()
	}
}

// proxyClosing records the proxy's close, unless the client ended the
// connection first or a reason is recorded already.
func (r *connRec) proxyClosing(reason, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closedBy != "" {
		return
	}
	if reason == reasonProxy && r.askedClose {
		r.closedBy, r.reason = closedByClient, reasonConnectionClose
		return
	}
	if reason == reasonProxy && r.proto == "h2" && r.active == 0 {
		// The HTTP/2 server's idle timer ends a connection with no
		// stream open for the idle bound with a GOAWAY, not a deadline.
		since := r.accepted
		if !r.lastEnd.IsZero() {
			since = r.lastEnd
		}
		if time.Since(since) >= r.p.bounds.Idle {
			reason = reasonIdleTimeout
		}
	}
	r.closedBy, r.reason, r.detail = closedByProxy, reason, detail
}

// boundPassed records a read that a bound's deadline ended: net/http
// closes the connection next. With no request yet, or bytes of the next
// one read, it is the header's bound; else the idle one's.
func (r *connRec) boundPassed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closedBy != "" {
		return
	}
	r.closedBy, r.reason = closedByProxy, reasonIdleTimeout
	if r.requests == 0 || r.read.Load() > r.readAtEnd {
		r.reason = reasonHeaderTimeout
	}
}

// refusing sees what is written to the client, below HTTP: an answer
// net/http's server writes itself to a request it could not read is
// followed by the connection's close, the proxy's.
func (r *connRec) refusing(b []byte) {
	line, rest, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(rest, []byte(refusalHeaders[2:])) {
		return
	}
	status := string(line[len("HTTP/1.1 "):])
	reason := reasonBadRequest
	if strings.HasPrefix(status, "431 ") {
		reason = reasonHeaderTooLarge
	}
	r.proxyClosing(reason, redact.Printable(status))
}

// ended is the connection's close, once.
func (r *connRec) ended() {
	r.mu.Lock()
	if r.isClosed {
		r.mu.Unlock()
		return
	}
	r.isClosed = true
	r.closedAt = time.Now()
	r.idleEndedLocked(r.closedAt)
	if r.idleTimer != nil {
		r.idleTimer.Stop()
	}
	r.mu.Unlock()
	close(r.closed)
	r.p.changed()
}

// kill closes the connection for a fault: with an RST when reset.
func (r *connRec) kill(reset bool, reason, detail string) {
	r.proxyClosing(reason, detail)
	if tc, ok := r.raw.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = r.raw.Close()
	r.ended()
}

// begin is a request's start on the connection: its index and the idle
// time before it.
func (r *connRec) begin(client string) (nth int, idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == "" {
		r.client = client
	}
	r.requests++
	nth = r.requests
	if nth == 1 {
		r.firstReq = time.Now()
	}
	if r.active == 0 {
		r.idleGen++
		if r.idleTimer != nil {
			r.idleTimer.Stop()
		}
		if !r.lastEnd.IsZero() {
			idle = time.Since(r.lastEnd)
			r.gaps++
			r.maxIdle = max(r.maxIdle, idle)
			r.reqIdle = max(r.reqIdle, idle)
		}
	}
	r.active++
	return nth, idle
}

// end is a request's end; the connection idle again arms its idle rules.
func (r *connRec) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	if r.active == 0 {
		r.quiet.Broadcast()
		r.lastEnd = time.Now()
		r.readAtEnd = r.read.Load()
		r.armIdleLocked()
	}
}

// armIdleLocked starts the timer of the first connection rule that takes
// this connection, once idle.
func (r *connRec) armIdleLocked() {
	rl := r.idleRule
	if rl == nil || r.isClosed {
		return
	}
	gen := r.idleGen
	r.idleTimer = time.AfterFunc(rl.dur, func() { r.idleFired(rl, gen) })
}

// idleFired applies a connection rule to a connection still idle since
// gen.
func (r *connRec) idleFired(rl *rule, gen uint64) {
	r.mu.Lock()
	if r.idleGen != gen || r.active > 0 || r.isClosed || r.isDark.Load() {
		r.mu.Unlock()
		return
	}
	r.faults = append(r.faults, rl.name())
	r.idleEndedLocked(time.Now())
	if rl.action == actGoDark {
		r.isDark.Store(true)
		r.mu.Unlock()
		r.p.faulted()
		return
	}
	r.mu.Unlock()
	r.p.faulted()
	r.kill(false, reasonFault, rl.name())
}

// idleEndedLocked counts the idle gap that ends at now, in the
// connection's close or in the dark, as its idle time: idle since its
// last request, none in flight, not dark already (the gap ended then).
func (r *connRec) idleEndedLocked(now time.Time) {
	if r.active > 0 || r.lastEnd.IsZero() || r.isDark.Load() {
		return
	}
	r.maxIdle = max(r.maxIdle, now.Sub(r.lastEnd))
}

func (r *connRec) addFault(name string) {
	r.mu.Lock()
	r.faults = append(r.faults, name)
	r.mu.Unlock()
	r.p.faulted()
}

func (r *connRec) setProto(p string) {
	r.mu.Lock()
	r.proto = p
	r.mu.Unlock()
}

// askClose records a request that asked for the connection's close.
func (r *connRec) askClose() {
	r.mu.Lock()
	r.askedClose = true
	r.mu.Unlock()
}

// clientEnded says whether the client ended the connection.
func (r *connRec) clientEnded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closedBy == closedByClient
}

// goAway sends a GOAWAY on the connection (HTTP/2): its server shuts
// down gracefully, the requests in flight served.
func (r *connRec) goAway() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	if srv == nil {
		return
	}
	r.p.serving.Add(1)
	go func() {
		defer r.p.serving.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-r.closed:
			case <-r.p.done:
			}
			cancel()
		}()
		_ = srv.Shutdown(ctx)
	}()
}

// Conn is one downstream connection, from accept to close.
type Conn struct {
	ID       uint64    `json:"id"`
	Client   string    `json:"client"`
	Remote   string    `json:"remote"`
	Proto    string    `json:"proto"`
	Accepted time.Time `json:"accepted"`
	FirstReq time.Time `json:"first_request,omitzero"` // when its first request began (zero: none)
	Closed   time.Time `json:"closed,omitzero"`
	Requests int       `json:"requests"`
	// MaxIdle is the longest idle gap since a request: one the next
	// request followed, or one that ended in the connection's close or in
	// the dark (go-dark).
	MaxIdle  time.Duration `json:"max_idle_ns"`
	ClosedBy string        `json:"closed_by,omitempty"`
	Reason   string        `json:"close_reason,omitempty"`
	Detail   string        `json:"close_detail,omitempty"`
	Faults   []string      `json:"faults,omitempty"`
	reqIdle  time.Duration // the longest idle gap a request followed: the server-idle-timeout verdict's
}

// snapshot returns the connection's record.
func (r *connRec) snapshot() Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Conn{ID: r.id, Client: r.client, Remote: r.remote, Proto: r.proto, Accepted: r.accepted,
		FirstReq: r.firstReq, Closed: r.closedAt, Requests: r.requests, MaxIdle: r.maxIdle, ClosedBy: r.closedBy,
		Reason: r.reason, Detail: r.detail, Faults: append([]string(nil), r.faults...), reqIdle: r.reqIdle}
	if c.Client == "" {
		if host, _, err := net.SplitHostPort(r.remote); err == nil {
			c.Client = host
		}
	}
	return c
}
