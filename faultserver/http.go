package faultserver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// This file runs the faults on the standard library's server, over HTTP/1
// and over its HTTP/2 server.

// outcome is how a fault's handler ended.
type outcome int

const (
	outDone     outcome = iota
	outCanceled         // the client went away while the handler waited
	outAbort            // end without a response: HTTP/1 closes the connection, HTTP/2 sends RST_STREAM(INTERNAL_ERROR)
)

// bodyLimit bounds how much of a request body a handler reads.
const bodyLimit = 1 << 20

// filler is the content of every generated body.
var filler = bytes.Repeat([]byte("x"), 32<<10)

// serveHTTP is the standard server's handler.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	tc := connFrom(r.Context())
	if tc == nil { // cannot happen: every connection comes from Accept
		http.Error(w, "faultserver: untracked connection", http.StatusInternalServerError)
		return
	}
	ep, f, n := s.read(r.URL.Path, tc)
	if f == nil {
		http.NotFound(w, r)
		return
	}
	if !s.enter(tc) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ep.enter()
	h := &handler{s: s, tc: tc}
	out := s.runFault(w, r, h, ep, f, n)
	h.finish()
	switch out {
	case outCanceled:
		ep.cancel()
	case outAbort:
		panic(http.ErrAbortHandler) // recovered quietly by net/http
	}
}

// handler is a running handler, registered with Server.enter.
type handler struct {
	s        *Server
	tc       *trackedConn
	finished bool
}

// finish unregisters the handler, once. A fault calls it just before its
// last action the client can observe, so that a client which saw the
// outcome never finds the handler still registered (and reported by Close).
func (h *handler) finish() {
	if !h.finished {
		h.finished = true
		h.s.exit(h.tc)
	}
}

// runFault produces f for the request r, the nth for its path on its
// connection.
func (s *Server) runFault(w http.ResponseWriter, r *http.Request, h *handler, ep *endpoint, f Fault, n int) outcome {
	h2 := r.ProtoMajor == 2
	switch f := f.(type) {
	case OK:
		h.finish()
		writeText(w, f.Body)
	case Status:
		if f.After > 0 {
			if out, ok := s.pause(r, h, f.After); !ok {
				return out
			}
		}
		h.finish()
		for k, v := range f.Header {
			w.Header()[k] = append([]string(nil), v...)
		}
		w.WriteHeader(f.Code)
	case Hang:
		drain(r)
		return s.wait(r, h)
	case CloseBeforeResponse:
		commit(r, ep, f.Write)
		if n > f.After {
			s.cut(w, r, h)
		} else {
			h.finish()
			writeText(w, "")
		}
	case Reset:
		commit(r, ep, f.Write)
		if n <= f.After {
			h.finish()
			writeText(w, "")
			break
		}
		h.finish()
		if h2 {
			return outAbort
		}
		if _, _, err := http.NewResponseController(w).Hijack(); err == nil {
			h.tc.cut.Store(true)
			h.tc.reset()
		}
	case CloseMidBody:
		writeHead(w, f.Length)
		writeN(w, f.Send)
		flush(w)
		if h2 {
			h.finish()
			return outAbort
		}
		s.cut(w, r, h)
	case StallMidBody:
		drain(r)
		writeHead(w, f.Length)
		writeN(w, f.Send)
		flush(w)
		return s.wait(r, h)
	case Trickle:
		return s.trickle(w, r, h, f)
	case LargeBody:
		writeHead(w, f.Size)
		writeN(w, f.Size-min(f.Size, 1))
		h.finish()
		writeN(w, min(f.Size, 1))
	case ConnectionClose:
		// The server closes this connection: whoever's FIN comes first
		// on the wire, the close is the server's (over TLS net/http
		// closes with a close_notify the connection cannot see).
		h.tc.peer.serverFirst()
		h.finish()
		w.Header().Set("Connection", "close")
		writeText(w, "")
	case CloseBeforeRead:
		drain(r)
		if n >= f.After {
			h.tc.plan(&plan{kind: planUnread, ep: ep, path: r.URL.Path, reset: f.Reset, count: true})
		}
		h.finish()
		writeText(w, "")
	case GoDark:
		drain(r)
		if n >= f.After {
			h.tc.plan(&plan{kind: planDark, ep: ep, path: r.URL.Path, h2: h2})
		}
		h.finish()
		writeText(w, "")
	case RequestLimit:
		drain(r)
		if n >= f.N && f.Announce {
			h.tc.peer.serverFirst() // as ConnectionClose
			h.finish()
			w.Header().Set("Connection", "close")
			writeText(w, "")
			break
		}
		if n >= f.N {
			if h2 {
				return s.unsupported(w, h, "RequestLimit without Announce over HTTP/2 needs RawHTTP2")
			}
			h.tc.plan(&plan{kind: planClose, ep: ep, path: r.URL.Path, count: !h.tc.tls})
		}
		h.finish()
		writeText(w, "")
	case IdleClose:
		drain(r)
		h.tc.plan(&plan{kind: planIdle, ep: ep, path: r.URL.Path, idle: f.Idle, h2: h2, count: !h.tc.tls})
		h.finish()
		writeText(w, "")
	case Write:
		drain(r)
		n := ep.commitWrite(r.Header)
		h.finish()
		if f.Report {
			body := Write{}.ReportBody(n)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(writeStatus(f))
			io.WriteString(w, body)
			return outDone
		}
		w.WriteHeader(writeStatus(f))
	}
	return outDone
}

// commit commits a write for r, after reading its body, if write is set
// and r's method is not GET or HEAD (the Write field of CloseBeforeResponse
// and Reset).
func commit(r *http.Request, ep *endpoint, write bool) {
	if write && r.Method != http.MethodGet && r.Method != http.MethodHead {
		drain(r)
		ep.commitWrite(r.Header)
	}
}

// unsupported answers 501: a fault the standard HTTP/2 server cannot
// produce, reached by a client that negotiated HTTP/2 over TLS.
func (s *Server) unsupported(w http.ResponseWriter, h *handler, why string) outcome {
	h.finish()
	http.Error(w, "faultserver: "+why, http.StatusNotImplemented)
	return outDone
}

// cut closes the connection of r without a (further) response: HTTP/1
// hijacks and closes it; HTTP/2 half-closes the TCP connection, so the client
// reads EOF and the standard server winds down when the client closes.
func (s *Server) cut(w http.ResponseWriter, r *http.Request, h *handler) {
	h.tc.cut.Store(true)
	if r.ProtoMajor == 2 {
		h.finish()
		h.tc.CloseWrite()
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	h.finish()
	if err != nil {
		h.tc.Close()
		return
	}
	conn.Close()
}

// wait blocks until the client goes away (outCanceled) or the server cuts
// the connection or closes (outAbort: no response must follow).
func (s *Server) wait(r *http.Request, h *handler) outcome {
	select {
	case <-r.Context().Done():
		return s.gone(h.tc)
	case <-s.closing:
		return outAbort
	}
}

// pause waits d, and reports false with the outcome if the client went
// away or the server closed first.
func (s *Server) pause(r *http.Request, h *handler, d time.Duration) (outcome, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return outDone, true
	case <-r.Context().Done():
		return s.gone(h.tc), false
	case <-s.closing:
		return outAbort, false
	}
}

// gone classifies a request context that ended: a cancellation by the client
// unless the server itself cut the connection or is closing.
func (s *Server) gone(tc *trackedConn) outcome {
	if tc.cut.Load() || s.isClosing() {
		return outAbort
	}
	return outCanceled
}

func (s *Server) trickle(w http.ResponseWriter, r *http.Request, h *handler, f Trickle) outcome {
	drain(r)
	writeHead(w, f.Bytes)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := range f.Bytes {
		if i > 0 && f.Interval > 0 {
			if timer == nil {
				timer = time.NewTimer(f.Interval)
			} else {
				timer.Reset(f.Interval)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return s.gone(h.tc)
			case <-s.closing:
				return outAbort
			}
		}
		if i == f.Bytes-1 {
			h.finish()
		}
		if _, err := w.Write(filler[:1]); err != nil {
			return outDone
		}
		flush(w)
	}
	return outDone
}

// drain reads (up to bodyLimit of) the request body, so that net/http can
// notice the client going away (it watches the connection only once the
// body has been read).
func drain(r *http.Request) {
	io.Copy(io.Discard, io.LimitReader(r.Body, bodyLimit))
}

func writeText(w http.ResponseWriter, body string) {
	if body == "" {
		body = "ok"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	io.WriteString(w, body)
}

func writeHead(w http.ResponseWriter, length int) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(length))
	w.WriteHeader(http.StatusOK)
}

// writeN writes n filler bytes, stopping at the first error.
func writeN(w io.Writer, n int) {
	for n > 0 {
		k := min(n, len(filler))
		if _, err := w.Write(filler[:k]); err != nil {
			return
		}
		n -= k
	}
}

func flush(w http.ResponseWriter) {
	http.NewResponseController(w).Flush()
}

func writeStatus(f Write) int {
	if f.Status == 0 {
		return http.StatusOK
	}
	return f.Status
}
