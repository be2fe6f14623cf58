package faultserver

import (
	"crypto/tls"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// ConnEventKind says what happened to a connection the server accepted.
type ConnEventKind int

// The connection events, in the order a connection sees them.
const (
	// ConnAccepted: the server accepted the TCP connection.
	ConnAccepted ConnEventKind = iota + 1
	// ConnRequest: the server read a request on it (HTTP/2: a stream's
	// headers); Path is the request's.
	ConnRequest
	// ConnClosed: the connection is closed; ClosedBy and How say by whom
	// and how.
	ConnClosed
	// ConnUnread: the client sent bytes the server will not read as a
	// request, on a connection a fault has doomed: the request that trips
	// [CloseBeforeRead], one that races the close of [RequestLimit] or
	// [IdleClose], each read on a connection gone dark ([GoDark]). Path is
	// the path whose fault armed the connection. It comes before the
	// connection's ConnClosed.
	ConnUnread
)

// A ConnEvent is one event of a connection's life, as the server saw it
// ([OnConnEvent]).
type ConnEvent struct {
	Kind ConnEventKind
	// Conn is the connection's id: 1, 2, … in the order accepted, unique
	// per server.
	Conn uint64
	// At is when the server saw the event.
	At time.Time
	// Path is the path of the request read (ConnRequest), or of the
	// fault that armed the connection (ConnUnread).
	Path string
	// ClosedBy is "client" when the client closed the connection first
	// (the server read its FIN or RST, or the client had sent its TLS
	// close_notify), "server" when the server closed it first (ConnClosed).
	ClosedBy string
	// How is "fin" (an orderly close) or "rst" (a reset) of the side that
	// closed first (ConnClosed).
	How string
}

// OnConnEvent makes the server call f with every event of every
// connection it accepts: accepted, each request read, bytes left unread,
// closed. f is called
// synchronously from the connection's goroutines, possibly concurrently,
// never with a lock of the server's held (it may call the server's
// methods): it must be quick and safe for concurrent use.
func OnConnEvent(f func(ConnEvent)) Option {
	return optionFunc(func(c *config) { c.events = f })
}

// Certificate implies [TLS] and serves cert instead of a fresh one; the last
// certificate of its chain (cert.Certificate), the CA that signed it or the
// certificate itself when it is alone, is what [Server.ClientTLSConfig]
// trusts. Several servers can then share one CA file.
func Certificate(cert tls.Certificate) Option {
	return optionFunc(func(c *config) { c.tls, c.cert = true, &cert })
}

// CloseConn closes the connection id as the server does when it cuts one
// ([Server.CloseClientConnections]): the handlers running on it end without
// counting a cancellation. It reports whether the connection was open.
func (s *Server) CloseConn(id uint64) bool {
	tc := s.conn(id)
	if tc == nil {
		return false
	}
	tc.cut.Store(true)
	tc.closeNow()
	return true
}

// ResetConn closes the connection id with a TCP RST (its linger set to 0),
// as a server that drops a connection abruptly: a request in flight on it
// gets no response. It reports whether the connection was open.
func (s *Server) ResetConn(id uint64) bool {
	tc := s.conn(id)
	if tc == nil {
		return false
	}
	tc.cut.Store(true)
	tc.reset()
	return true
}

// CloseWriteConn half-closes the connection id (the server's FIN), as a
// server that closes an idle kept-alive connection; it goes on reading, so
// the client's own close is seen and reported (a [ConnClosed] event with
// ClosedBy "server"), and a request the client still sends on it is read,
// counted and answered into the closed side (the client reads EOF). It
// reports whether the connection was open.
func (s *Server) CloseWriteConn(id uint64) bool {
	tc := s.conn(id)
	if tc == nil {
		return false
	}
	tc.cut.Store(true)
	tc.CloseWrite()
	return true
}

// conn returns the open connection id, or nil. A connection closed
// (its ConnClosed reported) is not open, though the server may not have
// forgotten it yet.
func (s *Server) conn(id uint64) *trackedConn {
	s.mu.Lock()
	var tc *trackedConn
	for c := range s.conns {
		if c.id == id {
			tc = c
			break
		}
	}
	s.mu.Unlock()
	if tc == nil {
		return nil
	}
	tc.peer.mu.Lock()
	closed := tc.peer.closed
	tc.peer.mu.Unlock()
	if closed {
		return nil
	}
	return tc
}

// Remove forgets the endpoint path: its fault (it answers 404 from now
// on), counters, keys and signals. A long-running server whose paths come
// and go calls it to bound its memory.
func (s *Server) Remove(path string) {
	s.mu.Lock()
	delete(s.endpoints, path)
	s.mu.Unlock()
}

// emit calls the event hook, if any.
func (s *Server) emit(ev ConnEvent) {
	if s.cfg.events != nil {
		s.cfg.events(ev)
	}
}

// peerState records how the client closed a connection, as the server
// first saw it.
type peerState struct {
	mu     sync.Mutex
	how    string // "fin" or "rst" once the peer closed
	closed bool   // the close event was emitted
	reset  bool   // the server closes with a reset
	server bool   // the server closed (or half-closed) first
}

// serverFirst records that the server is closing the connection (or its
// side of it) before any close of the client's was seen.
func (p *peerState) serverFirst() {
	p.mu.Lock()
	if p.how == "" {
		p.server = true
	}
	p.mu.Unlock()
}

// sawPeer records the client's close from a read or write error.
func (p *peerState) sawPeer(err error) {
	how := ""
	switch {
	case errors.Is(err, io.EOF):
		how = "fin"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		how = "rst"
	default:
		return
	}
	p.mu.Lock()
	if p.how == "" && !p.closed && !p.server {
		p.how = how
	}
	p.mu.Unlock()
}

// probePeer looks, for at most d, whether the client has closed c already:
// a TLS client's close_notify ends the server's reads before its FIN is
// read, so the server would otherwise take its own close for the first.
// It reads the TCP connection itself, whatever a fault made of c's reads.
func (p *peerState) probePeer(c *trackedConn, d time.Duration) {
	c.Conn.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for range 8 {
		if _, err := c.Conn.Read(b[:]); err != nil {
			if !c.cut.Load() {
				p.sawPeer(err)
			}
			return
		}
	}
}
