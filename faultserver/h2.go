package faultserver

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// This file is the raw HTTP/2 server of RawHTTP2: just enough HTTP/2,
// written with x/net/http2's Framer, to produce frame-level faults (GOAWAY,
// RST_STREAM) on demand. One goroutine per connection reads frames and does
// all the writing; a hanging stream is state, not a goroutine.

const (
	h2DefaultWindow   = 65535
	h2DefaultMaxFrame = 16384
)

// acceptRawH2 accepts connections until the listener is closed.
func (s *Server) acceptRawH2(ln net.Listener, cfg *tls.Config) {
	defer close(s.serveDone)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go s.serveRawH2(c.(*trackedConn), cfg)
	}
}

// serveRawH2 serves one connection until it ends.
func (s *Server) serveRawH2(tc *trackedConn, cfg *tls.Config) {
	defer s.connDone(tc)
	defer tc.Close()
	conn := tls.Server(tc, cfg)
	// The handshake and the client's preface within headerBound, as the
	// standard server bounds its handshake and request headers.
	tc.SetDeadline(time.Now().Add(headerBound))
	if err := conn.Handshake(); err != nil || conn.ConnectionState().NegotiatedProtocol != "h2" {
		return
	}
	c := &h2conn{
		s:          s,
		tc:         tc,
		tls:        conn,
		fr:         http2.NewFramer(conn, conn),
		streams:    make(map[uint32]*h2stream),
		connWindow: h2DefaultWindow,
		initWindow: h2DefaultWindow,
		maxFrame:   h2DefaultMaxFrame,
		idleSince:  time.Now(),
	}
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.run()
	// The connection is gone: a hanging stream's client went away, unless
	// the server cut the connection or is closing.
	for _, st := range c.streams {
		if st.hanging {
			c.endHang(st, c.s.gone(tc) == outCanceled)
		}
	}
}

// h2conn is the state of one raw HTTP/2 connection, owned by its goroutine.
type h2conn struct {
	s    *Server
	tc   *trackedConn
	tls  *tls.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer

	streams    map[uint32]*h2stream // streams we still owe something
	connWindow int64                // send flow-control window
	initWindow int64                // peer's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame   int                  // peer's SETTINGS_MAX_FRAME_SIZE

	bounded     bool   // the read deadline is idleBound's
	goneAway    bool   // GOAWAY sent: ignore streams above lastStream
	lastStream  uint32 // last-stream-id of our GOAWAY
	writeClosed bool   // half-closed: write nothing more
	maxStream   uint32 // the highest stream whose request was read

	wire      *plan     // armed CloseBeforeRead: the next HEADERS trips it
	idle      *plan     // IdleClose: close once idle
	idleSince time.Time // when the last stream ended or request was read
	deadline  bool      // a read deadline is set for the idle close
	doomed    *plan     // the close of RequestLimit or IdleClose: a HEADERS after it is unread
}

// h2stream is a response in progress.
type h2stream struct {
	id      uint32
	ep      *endpoint
	window  int64  // send flow-control window
	pending []byte // body not yet sent
	end     bool   // END_STREAM after pending
	hanging bool   // a handler waits on it (Hang, StallMidBody)
	cut     bool   // half-close the connection after pending
}

// run reads frames until the connection fails or a write fails.
func (c *h2conn) run() {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.tls, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	c.tc.SetDeadline(time.Time{})
	if err := c.fr.WriteSettings(); err != nil {
		return
	}
	for {
		c.idleDeadline()
		f, err := c.fr.ReadFrame()
		var se http2.StreamError
		switch {
		case errors.As(err, &se):
			err = c.rst(se.StreamID, se.Code)
		case err == nil:
			_, headers := f.(*http2.MetaHeadersFrame)
			busy := len(c.streams) > 0
			err = c.handle(f)
			if headers || busy || len(c.streams) > 0 {
				c.idleSince = time.Now() // a stream is open, or just ended
			}
		case c.deadline && isTimeout(err):
			err = c.idleClose()
		case c.bounded && isTimeout(err):
			return // idle for idleBound: the server closes it, as the standard server does
		}
		if err != nil {
			return
		}
	}
}

// idleDeadline sets the read deadline of IdleClose while the connection is
// idle (no stream open), and clears it otherwise.
func (c *h2conn) idleDeadline() {
	switch {
	case c.idle != nil && !c.writeClosed && len(c.streams) == 0:
		c.tls.SetReadDeadline(c.idleSince.Add(c.idle.idle))
		c.deadline, c.bounded = true, false
	case c.idle == nil && !c.writeClosed && len(c.streams) == 0:
		// A connection with no stream open is closed once idle for
		// idleBound: resources, not a fault.
		c.tls.SetReadDeadline(c.idleSince.Add(idleBound))
		c.deadline, c.bounded = false, true
	case c.deadline || c.bounded:
		c.tls.SetReadDeadline(time.Time{})
		c.deadline, c.bounded = false, false
	}
}

// idleClose closes an idle connection as net/http's server does at its
// IdleTimeout: GOAWAY(NO_ERROR) naming the last stream processed, then the
// half-close.
func (c *h2conn) idleClose() error {
	c.deadline = false
	c.tc.peer.serverFirst()
	c.goneAway, c.lastStream = true, c.maxStream
	if err := c.fr.WriteGoAway(c.maxStream, http2.ErrCodeNo, nil); err != nil {
		return err
	}
	c.doomed = c.idle
	c.cutBounded()
	return nil
}

// handle processes one frame; an error ends the connection.
func (c *h2conn) handle(f http2.Frame) error {
	if c.writeClosed {
		// Read until the client closes; a request that raced the close of
		// RequestLimit or IdleClose is counted, unread.
		if _, ok := f.(*http2.MetaHeadersFrame); ok && c.doomed != nil {
			c.doomed.ep.unread.Add(1)
			c.tc.unreadEvent(c.doomed)
			c.doomed = nil
		}
		return nil
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		f.ForeachSetting(func(st http2.Setting) error {
			switch st.ID {
			case http2.SettingInitialWindowSize:
				delta := int64(st.Val) - c.initWindow
				c.initWindow = int64(st.Val)
				for _, s := range c.streams {
					s.window += delta
				}
			case http2.SettingMaxFrameSize:
				c.maxFrame = int(st.Val)
			case http2.SettingHeaderTableSize:
				c.enc.SetMaxDynamicTableSizeLimit(st.Val)
			}
			return nil
		})
		if err := c.fr.WriteSettingsAck(); err != nil {
			return err
		}
		return c.flushAll()
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.fr.WritePing(true, f.Data)
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWindow += int64(f.Increment)
		} else if st := c.streams[f.StreamID]; st != nil {
			st.window += int64(f.Increment)
		}
		return c.flushAll()
	case *http2.DataFrame:
		// Request bodies are ignored; give the credit back.
		if n := f.Header().Length; n > 0 {
			if err := c.fr.WriteWindowUpdate(0, n); err != nil {
				return err
			}
			if !f.StreamEnded() {
				return c.fr.WriteWindowUpdate(f.StreamID, n)
			}
		}
	case *http2.RSTStreamFrame:
		if st := c.streams[f.StreamID]; st != nil {
			delete(c.streams, f.StreamID)
			if st.hanging {
				c.endHang(st, c.s.gone(c.tc) == outCanceled)
			}
		}
	case *http2.MetaHeadersFrame:
		return c.request(f)
	}
	return nil
}

// request runs the fault of a request whose headers were read.
func (c *h2conn) request(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if c.goneAway && id > c.lastStream {
		return nil // refused by our GOAWAY: not processed
	}
	if p := c.wire; p != nil {
		// CloseBeforeRead: the request is not read.
		c.wire = nil
		p.ep.unread.Add(1)
		c.tc.unreadEvent(p)
		if p.reset {
			c.tc.cut.Store(true)
			c.tc.reset()
			return net.ErrClosed
		}
		c.cutBounded()
		return nil
	}
	c.maxStream = max(c.maxStream, id)
	path := f.PseudoValue("path")
	if u, err := url.ParseRequestURI(path); err == nil {
		path = u.Path
	}
	header := make(http.Header)
	for _, hf := range f.RegularFields() {
		header.Add(hf.Name, hf.Value)
	}
	ep, fault, n := c.s.read(path, c.tc)
	st := &h2stream{id: id, ep: ep, window: c.initWindow}
	if fault == nil {
		return c.respond(st, http.StatusNotFound, nil, []byte("404 page not found\n"), true)
	}
	if !c.s.enter(c.tc) {
		return c.rst(id, http2.ErrCodeRefusedStream)
	}
	ep.enter()
	switch fault.(type) {
	case Hang, StallMidBody:
		// Running until the client goes away or the server cuts: endHang.
		st.hanging = true
	default:
		// Everything else is written at once: the handler is done before
		// the client can observe anything (see handler.finish).
		c.s.exit(c.tc)
	}
	return c.runFault(st, fault, f.PseudoValue("method"), header, path, n)
}

// runFault produces fault on stream st; method, header and path are the
// request's.
func (c *h2conn) runFault(st *h2stream, fault Fault, method string, header http.Header, path string, n int) error {
	switch f := fault.(type) {
	case OK:
		return c.respondText(st, f.Body)
	case Status:
		return c.respond(st, f.Code, f.Header, nil, true)
	case Write:
		n := st.ep.commitWrite(header)
		if f.Report {
			h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
			return c.respond(st, writeStatus(f), h, []byte(Write{}.ReportBody(n)), true)
		}
		return c.respond(st, writeStatus(f), nil, nil, true)
	case Hang:
		c.streams[st.id] = st
	case CloseBeforeResponse:
		if f.Write && method != http.MethodGet && method != http.MethodHead {
			st.ep.commitWrite(header)
		}
		if n > f.After {
			c.cut()
			return nil
		}
		return c.respondText(st, "")
	case Reset:
		if f.Write && method != http.MethodGet && method != http.MethodHead {
			st.ep.commitWrite(header)
		}
		if n <= f.After {
			return c.respondText(st, "")
		}
		return c.rst(st.id, http2.ErrCodeInternal)
	case RSTStream:
		return c.rst(st.id, http2.ErrCode(f.Code))
	case GoAway:
		// Stream ids of a client are odd: id-2 is the one before this.
		c.goneAway, c.lastStream = true, 0
		if st.id > 2 {
			c.lastStream = st.id - 2
		}
		return c.fr.WriteGoAway(c.lastStream, http2.ErrCode(f.Code), nil)
	case CloseMidBody:
		st.cut = true
		return c.respond(st, http.StatusOK, octets(f.Length), xs(f.Send), false)
	case StallMidBody:
		return c.respond(st, http.StatusOK, octets(f.Length), xs(f.Send), false)
	case LargeBody:
		return c.respond(st, http.StatusOK, octets(f.Size), xs(f.Size), true)
	case ConnectionClose:
		return c.goAwayAfter(st)
	case CloseBeforeRead:
		if err := c.respondText(st, ""); err != nil {
			return err
		}
		if n >= f.After {
			c.wire = &plan{kind: planUnread, ep: st.ep, path: path, reset: f.Reset, count: true}
		}
	case GoDark:
		if err := c.respondText(st, ""); err != nil {
			return err
		}
		if n >= f.After {
			c.tc.goDark(&plan{kind: planDark, ep: st.ep, path: path})
		}
	case RequestLimit:
		switch {
		case n < f.N:
			return c.respondText(st, "")
		case f.Announce:
			return c.goAwayAfter(st)
		}
		if err := c.respondText(st, ""); err != nil {
			return err
		}
		c.doomed = &plan{kind: planClose, ep: st.ep, path: path, count: true}
		c.cutBounded()
	case IdleClose:
		c.idle = &plan{kind: planIdle, ep: st.ep, path: path, idle: f.Idle, count: true}
		return c.respondText(st, "")
	}
	return nil
}

// goAwayAfter answers st 200 "ok" and sends GOAWAY covering it, as the
// standard server does for Connection: close.
func (c *h2conn) goAwayAfter(st *h2stream) error {
	c.tc.peer.serverFirst() // the GOAWAY: the close is the server's
	if err := c.respondText(st, ""); err != nil {
		return err
	}
	c.goneAway, c.lastStream = true, st.id
	return c.fr.WriteGoAway(st.id, http2.ErrCodeNo, nil)
}

func octets(n int) http.Header {
	return http.Header{"Content-Type": {"application/octet-stream"}, "Content-Length": {strconv.Itoa(n)}}
}

func (c *h2conn) respondText(st *h2stream, body string) error {
	if body == "" {
		body = "ok"
	}
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	return c.respond(st, http.StatusOK, h, []byte(body), true)
}

// xs returns n filler bytes, not to be modified.
func xs(n int) []byte {
	if n <= len(filler) {
		return filler[:n]
	}
	return bytes.Repeat(filler[:1], n)
}

// respond sends the response headers and queues body; end says whether the
// stream ends after it. A Content-Length is added if the stream ends and h
// has none.
func (c *h2conn) respond(st *h2stream, code int, h http.Header, body []byte, end bool) error {
	c.hbuf.Reset()
	c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(code)})
	if h.Get("Content-Length") == "" && end {
		c.enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
	}
	for k, vv := range h {
		k = strings.ToLower(k)
		switch k {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			continue // connection-specific: not allowed in HTTP/2
		}
		for _, v := range vv {
			c.enc.WriteField(hpack.HeaderField{Name: k, Value: v})
		}
	}
	if err := c.writeHeaders(st.id, c.hbuf.Bytes(), end && len(body) == 0); err != nil {
		return err
	}
	st.pending, st.end = body, end
	if len(body) == 0 && !st.hanging && !st.cut {
		return nil // done
	}
	c.streams[st.id] = st
	return c.flush(st)
}

// writeHeaders writes a header block as HEADERS and CONTINUATION frames.
func (c *h2conn) writeHeaders(id uint32, block []byte, end bool) error {
	first := true
	for first || len(block) > 0 {
		n := min(len(block), c.maxFrame)
		frag, last := block[:n], n == len(block)
		block = block[n:]
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: last})
			first = false
		} else {
			err = c.fr.WriteContinuation(id, last, frag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flushAll sends what flow control allows on every stream.
func (c *h2conn) flushAll() error {
	for _, st := range c.streams {
		if err := c.flush(st); err != nil {
			return err
		}
	}
	return nil
}

// flush sends as much of st's pending body as flow control allows, then
// finishes the stream if its body is sent: END_STREAM, half-close, or keep
// it hanging.
func (c *h2conn) flush(st *h2stream) error {
	for len(st.pending) > 0 {
		n := int(min(int64(len(st.pending)), int64(c.maxFrame), c.connWindow, st.window))
		if n <= 0 {
			return nil // wait for WINDOW_UPDATE
		}
		last := n == len(st.pending)
		if err := c.fr.WriteData(st.id, last && st.end, st.pending[:n]); err != nil {
			return err
		}
		c.connWindow -= int64(n)
		st.window -= int64(n)
		st.pending = st.pending[n:]
	}
	switch {
	case st.cut:
		delete(c.streams, st.id)
		c.cut()
	case st.end:
		delete(c.streams, st.id)
	}
	return nil
}

// rst resets a stream.
func (c *h2conn) rst(id uint32, code http2.ErrCode) error {
	delete(c.streams, id)
	return c.fr.WriteRSTStream(id, code)
}

// cut half-closes the connection: TLS close_notify and TCP FIN, then the
// connection is only read, until the client closes it. Closing at once
// could make the kernel answer the client's pending frames with an RST.
func (c *h2conn) cut() {
	c.tc.cut.Store(true)
	c.writeClosed = true
	c.tls.CloseWrite()
	c.tc.CloseWrite()
}

// cutBounded is cut, with the reads that follow bounded by drainBound.
func (c *h2conn) cutBounded() {
	c.cut()
	c.tls.SetReadDeadline(time.Now().Add(drainBound))
	c.deadline = false
}

// endHang ends a hanging stream's handler, counting a cancellation if the
// client went away.
func (c *h2conn) endHang(st *h2stream, canceled bool) {
	st.hanging = false
	delete(c.streams, st.id)
	c.s.exit(c.tc)
	if canceled {
		st.ep.cancel()
	}
}
