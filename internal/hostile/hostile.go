// Package hostile is a raw TCP server on loopback that answers every
// connection with bytes that are not (quite) HTTP, to check that a client
// classifies each reply, never hangs and leaks nothing: [New] starts a
// [Server] with one [Reply] (arbitrary bytes, when they are written, and how
// the connection ends), [Server.SetReply] changes it between the inputs of a
// fuzz test, and [Corpus] is a named set of broken replies. It is not API:
// the module's tests and fuzzers use it.
package hostile

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/connaudit/connaudit/internal/loopback"
)

// Wait says when a [Server] writes its reply.
type Wait int

const (
	// AfterRequest writes the reply once the request head has been read
	// (up to the blank line, at most 64 KiB, or until the client stops
	// sending). It is the zero value.
	AfterRequest Wait = iota
	// OnAccept writes the reply as soon as the connection is accepted,
	// before reading anything: a reply before the request.
	OnAccept
	// AfterFirstRead writes the reply after the first bytes arrive,
	// whatever they are, such as the first record of a TLS ClientHello.
	AfterFirstRead
)

// End says what a [Server] does after writing its reply.
type End int

const (
	// EndClose half-closes the connection (FIN) and reads and discards
	// until the client closes it, so that the client reads the whole reply
	// and then EOF, never a reset. It is the zero value.
	EndClose End = iota
	// EndStall keeps the connection open and silent, reading and
	// discarding, until the client closes it or the server closes: only a
	// client bound ends the request.
	EndStall
	// EndReset closes the connection with a TCP RST (linger 0).
	EndReset
)

// Reply is one broken reply: Raw, written as is, when Wait says,
// followed by End. Any bytes will do, so a fuzz test can pass its input as
// Raw.
type Reply struct {
	// Name identifies the reply in test names and reports.
	Name string
	// Raw is written to each connection, once.
	Raw []byte
	// Wait says when Raw is written.
	Wait Wait
	// End says what happens after Raw.
	End End
	// HTTPS marks a reply meant for a client that speaks TLS:
	// [Server.URL] then starts with "https://". The server itself never
	// speaks TLS.
	HTTPS bool
}

// maxRequestHead bounds how much of a request head a server reads
// before replying.
const maxRequestHead = 64 << 10

// maxDrain bounds how much a server reads and discards after its
// reply before it closes the connection.
const maxDrain = 16 << 20

// Corpus returns the broken replies, each new on every call:
//
//	garbage                      bytes that are not HTTP at all
//	empty                        nothing: the connection is closed after the request
//	truncated-status-line        "HTTP/1.1 2", then EOF
//	huge-headers                 a 200 whose headers exceed 1 MiB
//	invalid-chunk-size           a chunked body whose first chunk size is "zz"
//	short-body                   Content-Length: 1000 with 16 bytes, then EOF
//	negative-content-length      Content-Length: -5
//	conflicting-content-lengths  Content-Length: 5 and Content-Length: 6
//	http09                       a body with no status line (HTTP/0.9)
//	1xx-flood                    200 × "103 Early Hints", then silence
//	1xx-flood-huge               over 1 MiB of "103 Early Hints", then silence
//	tls-alert                    a fatal TLS handshake_failure alert to the ClientHello (HTTPS)
//	reply-before-request         a valid 200, written on accept
func Corpus() []Reply {
	return []Reply{
		{Name: "garbage", Raw: []byte("\x00\xff\xfeSSH-2.0-OpenSSH_9.6 not http\r\n\x01\x02\x03\r\n\r\n")},
		{Name: "empty"},
		{Name: "truncated-status-line", Raw: []byte("HTTP/1.1 2")},
		{Name: "huge-headers", Raw: hugeHeaders(1<<20 + 64<<10)},
		{Name: "invalid-chunk-size", Raw: []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")},
		{Name: "short-body", Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly sixteen byt")},
		{Name: "negative-content-length", Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello")},
		{Name: "conflicting-content-lengths", Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")},
		{Name: "http09", Raw: []byte("<html><body>no status line here</body></html>\n")},
		{Name: "1xx-flood", Raw: informational(200), End: EndStall},
		{Name: "1xx-flood-huge", Raw: informational(1<<20/len(earlyHints) + 1000), End: EndStall},
		// A TLS record: content type alert (21), version TLS 1.2, length 2,
		// level fatal (2), description handshake_failure (40).
		{Name: "tls-alert", Raw: []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}, Wait: AfterFirstRead, HTTPS: true},
		{Name: "reply-before-request", Raw: []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), Wait: OnAccept},
	}
}

const earlyHints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"

func informational(n int) []byte {
	return bytes.Repeat([]byte(earlyHints), n)
}

// hugeHeaders returns a 200 "ok" whose header section is at least size
// bytes.
func hugeHeaders(size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 1024)
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
	value := strings.Repeat("x", 1000)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "X-Pad-%d: %s\r\n", i, value)
	}
	b.WriteString("\r\nok")
	return b.Bytes()
}

// A Server is a raw TCP server on a loopback address that answers each
// connection with one [Reply]. It counts the connections it accepts;
// its goroutines end at [Server.Close]. All methods are safe for
// concurrent use.
type Server struct {
	ln       net.Listener
	accepted atomic.Int64
	reply    atomic.Pointer[Reply]
	done     chan struct{} // closed when the accept loop returned
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// New starts a [Server] on 127.0.0.1 with a system-chosen port that
// answers every connection with reply. The caller must call [Server.Close].
func New(reply Reply) (*Server, error) {
	if err := reply.validate(); err != nil {
		return nil, err
	}
	ln, err := loopback.Listen("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	h := &Server{ln: ln, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	h.reply.Store(cloneReply(reply))
	go h.accept()
	return h, nil
}

func (r Reply) validate() error {
	if r.Wait < AfterRequest || r.Wait > AfterFirstRead {
		return fmt.Errorf("hostile: Reply %q: unknown Wait %d", r.Name, r.Wait)
	}
	if r.End < EndClose || r.End > EndReset {
		return fmt.Errorf("hostile: Reply %q: unknown End %d", r.Name, r.End)
	}
	return nil
}

func cloneReply(r Reply) *Reply {
	r.Raw = bytes.Clone(r.Raw)
	return &r
}

// SetReply makes the connections accepted from now on answer with reply
// (those already accepted keep theirs), so that one server can serve many
// inputs of a fuzz test. It fails, changing nothing, on an unknown Wait or
// End.
func (h *Server) SetReply(reply Reply) error {
	if err := reply.validate(); err != nil {
		return err
	}
	h.reply.Store(cloneReply(reply))
	return nil
}

// Reply returns the reply given to new connections.
func (h *Server) Reply() Reply { return *cloneReply(*h.reply.Load()) }

// Addr returns the listening address, "host:port".
func (h *Server) Addr() string { return h.ln.Addr().String() }

// URL returns "http://host:port", or "https://host:port" when the current
// reply is marked HTTPS.
func (h *Server) URL() string {
	if h.reply.Load().HTTPS {
		return "https://" + h.Addr()
	}
	return "http://" + h.Addr()
}

// ConnsAccepted returns how many TCP connections the server accepted. A
// connection is counted before anything is read from or written to it, so
// a client that saw any reply finds its connection counted.
func (h *Server) ConnsAccepted() int64 { return h.accepted.Load() }

func (h *Server) accept() {
	defer close(h.done)
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return // closed (a test server does not retry other errors)
		}
		h.accepted.Add(1)
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			c.Close()
			continue
		}
		h.conns[c] = struct{}{}
		h.wg.Add(1)
		h.mu.Unlock()
		go h.serve(c, h.reply.Load())
	}
}

// serve answers one connection with r.
func (h *Server) serve(c net.Conn, r *Reply) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
	}()
	switch r.Wait {
	case AfterRequest:
		if !readHead(c) {
			c.Close()
			return
		}
	case AfterFirstRead:
		var buf [4096]byte
		if n, err := c.Read(buf[:]); n == 0 && err != nil {
			c.Close()
			return
		}
	}
	if _, err := c.Write(r.Raw); err != nil {
		c.Close()
		return
	}
	switch r.End {
	case EndReset:
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		return
	case EndClose:
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	// Read until the client closes (or Close closes c), so that the
	// final close never finds unread data, which would make it a reset.
	io.Copy(io.Discard, io.LimitReader(c, maxDrain))
	c.Close()
}

// readHead reads a request head: until a blank line, maxRequestHead bytes,
// or the end of the client's data. It reports whether the client is still
// there.
func readHead(c net.Conn) bool {
	var (
		buf  = make([]byte, 4096)
		tail []byte // the last 3 bytes read, to find a terminator split across reads
		seen int
	)
	for seen < maxRequestHead {
		n, err := c.Read(buf)
		if n > 0 {
			seen += n
			window := append(tail, buf[:n]...)
			if bytes.Contains(window, []byte("\r\n\r\n")) {
				return true
			}
			tail = append([]byte(nil), window[max(0, len(window)-3):]...)
		}
		if err != nil {
			return false
		}
	}
	return true
}

// Close stops accepting, closes every connection and waits for the
// server's goroutines to end. It returns nil, also on a second call.
func (h *Server) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.ln.Close()
	<-h.done
	h.mu.Lock()
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}
