package pool

import (
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connaudit/connaudit/internal/vocab"
)

// ConnState is the state of a tracked connection. A connection goes
// dialing → (handshake) → idle or active → … → closed; a dial that fails
// goes dialing → failed:
//
//	dialing    the dial is in progress
//	handshake  TCP is up, the TLS handshake is in progress
//	active     serving a request (HTTP/2: at least one stream)
//	idle       open, serving nothing
//	closed     closed; see [Conn.CloseReason]
//	failed     the dial failed
type ConnState = vocab.ConnState

// Closer says which side closed a connection: "client" or "server".
type Closer = vocab.Closer

// CloseReason says why a connection was closed. Closed by the client:
//
//	idle-timeout            idle longer than http.Transport.IdleConnTimeout
//	early-body-close        a response body was closed before EOF
//	close-idle-connections  CloseIdleConnections (or a dial that ended unused after it)
//	idle-pool-full          no room in the idle pool (MaxIdleConnsPerHost, MaxIdleConns) for a
//	                        connection returned to it, or for a dial that ended unused: its
//	                        request got another connection first (detail: never used)
//	request-error           the request on it failed (detail: its class)
//	handshake-failed        the TLS handshake failed or timed out
//	handshake-abandoned     the Transport cancelled the handshake: no request needed the connection
//	keep-alives-disabled    http.Transport.DisableKeepAlives, or a negative MaxIdleConnsPerHost:
//	                        the Transport keeps no connection for another request
//	protocol-error          the server broke the protocol: an HTTP/2 connection error (a
//	                        flow-control overflow, an oversized header block), a malformed
//	                        response, or bytes sent when no response was due (after a
//	                        response, or a body to HEAD); detail says which
//	h2-unused               an HTTP/2 connection dialed while another was being dialed for
//	                        the host, closed unused: net/http keeps one HTTP/2 connection
//	                        per host
//	client-close            closed for another reason
//
// Closed by the server:
//
//	connection-close        the response said "Connection: close"
//	http1.0-no-keep-alive   an HTTP/1.0 response without keep-alive
//	server-closed-idle      closed while the connection was idle (over TLS: its close_notify read)
//	server-eof              closed during a request (over TLS, where its close_notify may hide
//	                        the FIN: seen from the Transport sending the request again)
//	server-reset            reset the connection
//	goaway                  HTTP/2 GOAWAY (inferred: the connection ended after one)
type CloseReason = vocab.CloseReason

// The connection states, as [ConnState] lists them.
const (
	StateDialing   ConnState = vocab.StateDialing   // the dial is in progress
	StateHandshake ConnState = vocab.StateHandshake // TCP is up, the TLS handshake is in progress
	StateActive    ConnState = vocab.StateActive    // serving a request (HTTP/2: at least one stream)
	StateIdle      ConnState = vocab.StateIdle      // open, serving nothing
	StateClosed    ConnState = vocab.StateClosed    // closed; see CloseReason
	StateFailed    ConnState = vocab.StateFailed    // the dial failed
)

// The sides that close a connection.
const (
	ClosedByClient Closer = vocab.ClosedByClient
	ClosedByServer Closer = vocab.ClosedByServer
)

// The close reasons, the client's first, as [CloseReason] lists them.
const (
	ReasonIdleTimeout      CloseReason = vocab.ReasonIdleTimeout      // client: idle longer than IdleConnTimeout
	ReasonEarlyBodyClose   CloseReason = vocab.ReasonEarlyBodyClose   // client: a body was closed before EOF
	ReasonCloseIdle        CloseReason = vocab.ReasonCloseIdle        // client: CloseIdleConnections
	ReasonIdlePoolFull     CloseReason = vocab.ReasonIdlePoolFull     // client: no room in the idle pool
	ReasonRequestError     CloseReason = vocab.ReasonRequestError     // client: the request on it failed (detail: its class)
	ReasonHandshakeFailed  CloseReason = vocab.ReasonHandshakeFailed  // client: the TLS handshake failed or timed out
	ReasonHandshakeAbandon CloseReason = vocab.ReasonHandshakeAbandon // client: the Transport cancelled the handshake, no request needing the connection
	ReasonKeepAlivesOff    CloseReason = vocab.ReasonKeepAlivesOff    // client: DisableKeepAlives, MaxIdleConnsPerHost < 0
	ReasonClient           CloseReason = vocab.ReasonClient           // client: closed for another reason
	ReasonProtocolError    CloseReason = vocab.ReasonProtocolError    // client: gave it up over the server's protocol violation
	ReasonH2Unused         CloseReason = vocab.ReasonH2Unused         // client: an HTTP/2 connection dialed beside another and closed unused
	ReasonPingTimeout      CloseReason = vocab.ReasonPingTimeout      // client: its HTTP/2 health check's PING went unanswered
	ReasonConnectionClose  CloseReason = vocab.ReasonConnectionClose  // server: "Connection: close"
	ReasonHTTP10           CloseReason = vocab.ReasonHTTP10           // server: HTTP/1.0 without keep-alive
	ReasonServerClosedIdle CloseReason = vocab.ReasonServerClosedIdle // server: closed while the connection was idle
	ReasonServerEOF        CloseReason = vocab.ReasonServerEOF        // server: closed during a request
	ReasonServerReset      CloseReason = vocab.ReasonServerReset      // server: reset the connection
	ReasonServerGoAway     CloseReason = vocab.ReasonServerGoAway     // server: HTTP/2 GOAWAY (inferred)
)

// StateChange is one entry of a connection's state history.
type StateChange struct {
	State ConnState `json:"state"`
	At    time.Time `json:"at"`
}

// Conn is a snapshot of a tracked connection.
type Conn struct {
	ID     uint64 `json:"id"`
	Host   string `json:"host"` // the address dialed, host:port
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"`
	// Scheme is the URL scheme ("http", "https") of the request it was
	// dialed for; empty for a dial of a request sent on
	// [Pool.Transport] directly, which the pool does not see.
	Scheme string `json:"scheme,omitempty"`
	// Proto is "HTTP/1.1" or "h2" once known: from when it opened, for
	// a connection over TCP alone (unless the Transport may speak HTTP/2
	// without TLS) or after a TLS handshake whose negotiated protocol the
	// pool saw, else from its first response; an HTTP/1.0 server's first
	// response makes it "HTTP/1.0".
	Proto      string        `json:"proto,omitempty"`
	TLSVersion string        `json:"tls_version,omitempty"`
	TLSResumed bool          `json:"tls_resumed,omitempty"`
	State      ConnState     `json:"state"`
	History    []StateChange `json:"history"`
	DialedAt   time.Time     `json:"dialed_at"`
	// FirstUsedAt is when it was first handed to a request (zero: never).
	FirstUsedAt time.Time `json:"first_used_at,omitzero"`
	// DialedFor is the timeline id of the request whose dial made it.
	DialedFor    uint64 `json:"dialed_for,omitempty"`
	BytesRead    int64  `json:"bytes_read"`
	BytesWritten int64  `json:"bytes_written"`
	// Requests is the number of requests it served; RequestIDs the
	// timeline ids of the first of them.
	Requests   int      `json:"requests"`
	RequestIDs []uint64 `json:"request_ids,omitempty"`
	// Active lists the timeline ids of the requests it serves now.
	Active      []uint64    `json:"active,omitempty"`
	ClosedBy    Closer      `json:"closed_by,omitempty"`
	CloseReason CloseReason `json:"close_reason,omitempty"`
	CloseDetail string      `json:"close_detail,omitempty"`
	ClosedAt    time.Time   `json:"closed_at,omitzero"`
	DialError   string      `json:"dial_error,omitempty"`
	// Abandoned is set on a connection whose dial or TLS handshake the
	// Transport cancelled because no request needed it any more
	// (CloseIdleConnections cancels such dials; a request's own end does
	// not): its dial failed, or it closed with reason "handshake-abandoned",
	// and nothing went wrong.
	Abandoned bool `json:"abandoned,omitempty"`
}

const maxRequestIDs = 64

// connState is the pool's record of one connection; guarded by Pool.mu
// except for the atomic counters.
type connState struct {
	Conn
	io           *connIO
	hc           *counters // the counters of Host
	active       activeSet
	readErr      error     // first read error, seen before Close
	readErrState ConnState // the state when it was seen
	putIdleErr   error     // the last PutIdleConn error
	closeReq     uint64
	h2           bool
	protoSeen    bool     // Proto is its first response's
	doomed       bool     // the Transport is closing it
	protoErr     bool     // a request on it (HTTP/2) ended with a connection error
	last         *request // the last request that ended while it was active
	idleSince    stamp    // when it last went idle
	openedAt     stamp    // when it opened (its TLS handshake, if any, done)
	readAtOpen   int64    // the bytes read by then
	// What the pool saw of the last request handed the connection (an
	// HTTP/1 connection serves one at a time): the Write calls begun and
	// the bytes written before it got the connection, the Write calls
	// begun when the first read error came (readErr), and, when the
	// connection was idle then, since when (gotIdle) and when it was
	// handed over (gotAt).
	writesAtGot, writtenAtGot int64
	writesAtReadErr           int64
	gotIdle                   bool
	idleAtGot, gotAt          stamp
	// dialCtx is the context of its dial while its TLS handshake runs:
	// the Transport runs the handshake under it, and cancels it only to
	// abandon the dial.
	dialCtx context.Context
	// tlsFor is the timeline id of the request whose dial made it, while
	// it is among that request's handshakes (Pool.pendingTLS); tls is set
	// on a connection the Transport ran a TLS handshake on.
	tlsFor uint64
	tls    bool
}

// activeSet is the set of timeline ids of the requests a connection
// serves. An HTTP/1 connection serves one at a time, which needs no map:
// only the ids beyond the first (HTTP/2 streams) go into one. Timeline ids
// are never 0.
type activeSet struct {
	one  uint64
	more map[uint64]struct{}
}

func (s *activeSet) add(id uint64) {
	switch {
	case s.one == 0 || s.one == id:
		s.one = id
	default:
		if s.more == nil {
			s.more = map[uint64]struct{}{}
		}
		s.more[id] = struct{}{}
	}
}

func (s *activeSet) remove(id uint64) {
	if s.one != id {
		delete(s.more, id)
		return
	}
	s.one = 0
	if len(s.more) == 0 {
		// An HTTP/1 connection's: no map to range over (ranging over
		// even a nil map costs an iterator's set-up).
		return
	}
	for m := range s.more {
		// Promote another id, so that the set stays one id plus the rest.
		s.one = m
		delete(s.more, m)
		break
	}
}

func (s *activeSet) has(id uint64) bool {
	if s.one == id {
		return id != 0
	}
	_, ok := s.more[id]
	return ok
}

func (s *activeSet) len() int {
	if s.one == 0 {
		return 0
	}
	return 1 + len(s.more)
}

// all yields the ids.
func (s *activeSet) all() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		if s.one == 0 || !yield(s.one) {
			return
		}
		for id := range s.more {
			if !yield(id) {
				return
			}
		}
	}
}

// connIO counts a connection's bytes. Its counters change on every Read
// and Write, on the Transport's read and write goroutines: each has a cache
// line of its own (the struct is 128 bytes, a size class whose objects are
// 128-byte aligned), away from the pool's record, which the requests'
// goroutines write, so that the two do not keep taking each other's line.
type connIO struct {
	read atomic.Int64
	// For HTTP/2 connections (h2) only, as offsets from ioEpoch: when a
	// Read last returned data, when a Write last began, and lastRead as it
	// was then. net/http's idle timer for an HTTP/2 connection starts when
	// its last stream ends, which the pool sees as a read, not as a
	// request's end (see sinceRead).
	lastRead atomic.Int64
	h2       atomic.Bool
	// idle is set while the connection is idle; closing once an HTTP/1
	// connection wrote while idle, which only a TLS close_notify does:
	// the client is closing it, and the server's answer to that (its own
	// close_notify, its FIN) is no close of the server's.
	idle, closing atomic.Bool
	// closeNotify is set when a write deadline was set on the connection,
	// which crypto/tls does, and net/http never, to send its close_notify
	// alert as it closes a connection whose handshake is complete: a
	// connection the pool still counts in its handshake then finished it.
	closeNotify atomic.Bool
	// lastRecord is the last TLS record whose header was read: 1 << 32 if
	// the connection was idle then, | its content type << 16 | its length;
	// 0 if none (see recordReader).
	lastRecord  atomic.Int64
	_           [24]byte
	written     atomic.Int64
	lastWrite   atomic.Int64
	readAtWrite atomic.Int64
	// writes counts the Write calls begun: a read error that sees the
	// count unchanged since a request got the connection came before any
	// byte of that request could reach the server.
	writes atomic.Int64
	_      [32]byte
}

// ioEpoch is the origin of connIO's times.
var ioEpoch = time.Now()

// sinceRead returns how long ago an HTTP/2 connection last received data
// before it began to close, at now (an offset from ioEpoch), and false if
// it never did. A TLS connection's close begins with a write (its
// close_notify), which the server may answer before the connection is
// closed: what was read after a write as recent as that (within slack) is
// the answer to the close, not what came before it.
func (io *connIO) sinceRead(now, slack time.Duration) (time.Duration, bool) {
	r := time.Duration(io.lastRead.Load())
	if w := time.Duration(io.lastWrite.Load()); w > 0 && r >= w && now-w <= slack {
		r = time.Duration(io.readAtWrite.Load())
	}
	if r == 0 {
		return 0, false
	}
	return now - r, true
}

// setH2 marks c an HTTP/2 connection.
func (c *connState) setH2() {
	c.Proto, c.h2 = "h2", true
	c.io.h2.Store(true)
}

// maxHistory bounds a connection's state history: a kept-alive HTTP/1
// connection changes state twice per request.
const maxHistory = 256

// setState moves c to state s at now. It runs twice a request: what only
// a connection's first requests do (its history, its first use) is out of
// line.
func (c *connState) setState(s ConnState, now stamp) {
	c.State = s
	c.io.idle.Store(s == vocab.StateIdle)
	if s == vocab.StateIdle {
		c.idleSince = now
	}
	if len(c.History) < maxHistory || c.FirstUsedAt.IsZero() {
		c.recordState(s, now)
	}
}

// recordState adds s at now to c's history while it has room, and marks
// c's first use.
//
//go:noinline
func (c *connState) recordState(s ConnState, now stamp) {
	if len(c.History) < maxHistory {
		c.History = append(c.History, StateChange{State: s, At: now.time()})
	}
	if s == vocab.StateActive && c.FirstUsedAt.IsZero() {
		c.FirstUsedAt = now.time()
	}
}

// stamp is a point in time as a timeline gives it: its start and an
// offset. Turning it into a time.Time costs a time.Time.Add, which most
// events of a request never need (a connection's history is full after
// its first 128 requests), so the pool keeps stamps and converts them when
// it reads them.
type stamp struct {
	start time.Time
	at    time.Duration
}

// stampOf returns the stamp of t.
func stampOf(t time.Time) stamp { return stamp{start: t} }

func (s stamp) time() time.Time { return s.start.Add(s.at) }

// trackedConn is the net.Conn the pool's dialer returns.
type trackedConn struct {
	net.Conn
	p *Pool
	c *connState
	// io is c.io, kept here so that Read and Write, on every call, touch
	// neither c nor the pool.
	io      *connIO
	errOnce sync.Once
	closed  atomic.Bool
	// records follows the TLS records read, when the Transport runs TLS
	// over it (tls).
	records *recordReader
}

// ConnID returns the pool's id of the connection, for httptrace.
func (t *trackedConn) ConnID() uint64 { return t.c.ID }

func (t *trackedConn) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	t.io.read.Add(int64(n))
	if t.records != nil && n > 0 {
		// (A read once the client began its close, with its close_notify,
		// is the server's answer, not the server's own doing.)
		t.records.feed(b[:n], t.io.idle.Load(), !t.io.closing.Load(), t.io)
	}
	if n > 0 && t.io.h2.Load() {
		t.io.lastRead.Store(int64(time.Since(ioEpoch)))
	}
	if err != nil && !t.closed.Load() && !t.io.closing.Load() && !isDeadline(err) {
		t.errOnce.Do(func() { t.p.connReadErr(t.c, err) })
	}
	return n, err
}

func (t *trackedConn) Write(b []byte) (int, error) {
	if t.io.h2.Load() {
		// Before the write: a reply to it must come after both.
		t.io.readAtWrite.Store(t.io.lastRead.Load())
		t.io.lastWrite.Store(int64(time.Since(ioEpoch)))
	} else if t.io.idle.Load() {
		t.io.closing.Store(true)
	}
	t.io.writes.Add(1)
	n, err := t.Conn.Write(b)
	t.io.written.Add(int64(n))
	return n, err
}

func (t *trackedConn) Close() error {
	// Mark the connection closed before closing it, so that the error a
	// concurrent Read gets from this Close is not taken for the server's.
	first := t.closed.CompareAndSwap(false, true)
	err := t.Conn.Close()
	if first {
		t.p.connClosed(t.c)
	}
	return err
}

// SetWriteDeadline sets the write deadline of the connection, and records
// that one was set (see connIO.closeNotify).
func (t *trackedConn) SetWriteDeadline(d time.Time) error {
	t.io.closeNotify.Store(true)
	if t.io.h2.Load() && t.p.closeNotifyDeadline(d) {
		// The client is closing the HTTP/2 connection: what the
		// server sends now (its own close_notify, its FIN) answers
		// that, and is no close of the server's.
		t.io.closing.Store(true)
	}
	return t.Conn.SetWriteDeadline(d)
}

// closeNotifyDeadline reports whether d is the write deadline crypto/tls
// sets to send its close_notify as it closes a connection (5s ahead), on a
// Transport whose HTTP/2 client sets none of its own (it does for
// HTTP2Config.WriteByteTimeout only).
func (p *Pool) closeNotifyDeadline(d time.Time) bool {
	if h := p.tr.HTTP2; h != nil && h.WriteByteTimeout > 0 {
		return false
	}
	left := time.Until(d)
	return left > 4*time.Second && left <= 5*time.Second
}

// SetDeadline sets the read and write deadlines of the connection, and
// records that a write deadline was set.
func (t *trackedConn) SetDeadline(d time.Time) error {
	t.io.closeNotify.Store(true)
	return t.Conn.SetDeadline(d)
}

// NetConn returns the underlying connection.
func (t *trackedConn) NetConn() net.Conn { return t.Conn }

func isDeadline(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func serverSide(err error) (CloseReason, bool) {
	switch {
	case errors.Is(err, io.EOF):
		return vocab.ReasonServerEOF, true
	case errors.Is(err, syscall.ECONNRESET):
		return vocab.ReasonServerReset, true
	}
	return "", false
}

// reqSet holds the requests not yet finished, by timeline id. A pool that
// carries one request at a time, such as a client calling one host in
// turn, needs no map: the first request goes apart, and only those in
// flight beside it go into one.
type reqSet struct {
	one  *request
	more map[uint64]*request
}

// get returns the request of timeline id, or nil.
func (s *reqSet) get(id uint64) *request {
	if r := s.one; r != nil && r.id == id {
		return r
	}
	return s.more[id]
}

// add adds r, which is not in s.
func (s *reqSet) add(r *request) {
	if s.one == nil {
		s.one = r
		return
	}
	if s.more == nil {
		s.more = make(map[uint64]*request)
	}
	s.more[r.id] = r
}

// remove removes r, if it is in s.
func (s *reqSet) remove(r *request) {
	if s.one == r {
		s.one = nil
		return
	}
	if s.more[r.id] == r {
		delete(s.more, r.id)
	}
}

// len returns the number of requests.
func (s *reqSet) len() int {
	n := len(s.more)
	if s.one != nil {
		n++
	}
	return n
}

// all yields the requests.
func (s *reqSet) all() iter.Seq[*request] {
	return func(yield func(*request) bool) {
		if s.one != nil && !yield(s.one) {
			return
		}
		for _, r := range s.more {
			if !yield(r) {
				return
			}
		}
	}
}
