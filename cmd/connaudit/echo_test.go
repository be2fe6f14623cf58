package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/connaudit/connaudit/internal/testserver"
	"golang.org/x/net/http2"
)

// Where a request carries the secret an echo server sends back.
const (
	carryHeader   = iota // -H "X-Api-Key: secret", a header named secret
	carryBearer          // Authorization: Bearer secret
	carryCookie          // Cookie: sid=secret
	carryPassword        // the URL's password
	carryUser            // the URL's user name
	carryBasic           // the Basic credentials http.Client makes of the URL's user information
	carryQuery           // a query value
	carryBareKey         // a query key written without a value
	carries
)

// How an echo server writes what it was sent.
const (
	formRaw        = iota // as it came
	formQuote             // Go-quoted (strconv.Quote, without the quotes)
	formQuoteASCII        // strconv.QuoteToASCII
	formJSON              // JSON-escaped (encoding/json)
	formJSONASCII         // JSON-escaped, every character beyond ASCII as \uXXXX
	formQuery             // percent-encoded as a query value
	formPath              // percent-encoded as a path
	formLowerHex          // percent-encoded, lower-case hex
	forms
)

// Where an echo server writes it.
const (
	placeStatusLine      = iota // the whole status line: "malformed HTTP response %q"
	placeStatusCode             // the status code: "malformed HTTP status code %q"
	placeMalformedHeader        // a header line with no name: textproto quotes it raw
	placeHeader                 // valid headers, Keep-Alive among them (the probe quotes it)
	placeTrailer                // a trailer, and a malformed one
	placeLocation               // a Location that does not parse
	placeErrorBody              // a 500 whose body runs past its length: the next request reads it as its response
	placeGoAway                 // the debug data of an HTTP/2 GOAWAY (over TLS)
	places
)

// echo says what an echo server sends back of a request.
type echo struct{ carry, form, place int }

func (e echo) String() string {
	return fmt.Sprintf("carry %d, form %d, place %d", e.carry, e.form, e.place)
}

// carried returns the secret as req carries it.
func carried(req *http.Request, carry int) string {
	switch carry {
	case carryHeader:
		return req.Header.Get("X-Api-Key")
	case carryBearer:
		return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	case carryCookie:
		if c, err := req.Cookie("sid"); err == nil {
			return c.Value
		}
		_, v, _ := strings.Cut(req.Header.Get("Cookie"), "=")
		return v
	case carryPassword:
		_, p, _ := req.BasicAuth()
		return p
	case carryUser:
		u, _, _ := req.BasicAuth()
		return u
	case carryBasic:
		return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
	case carryQuery:
		return req.URL.Query().Get("token")
	case carryBareKey:
		k, _, _ := strings.Cut(req.URL.RawQuery, "&")
		if d, err := url.QueryUnescape(k); err == nil {
			return d
		}
		return k
	}
	return ""
}

// encode writes v in the form asked for.
func encode(v string, form int) string {
	switch form {
	case formQuote:
		q := strconv.Quote(v)
		return q[1 : len(q)-1]
	case formQuoteASCII:
		q := strconv.QuoteToASCII(v)
		return q[1 : len(q)-1]
	case formJSON:
		b, _ := json.Marshal(v)
		return string(b[1 : len(b)-1])
	case formJSONASCII:
		var b strings.Builder
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteString(`\` + string(r))
			case r < 0x20 || r >= 0x7f:
				if r > 0xffff {
					r -= 0x10000
					fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
					continue
				}
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		return b.String()
	case formQuery:
		return url.QueryEscape(v)
	case formPath:
		return url.PathEscape(v)
	case formLowerHex:
		e := []byte(url.QueryEscape(v))
		for i := 0; i+2 < len(e); i++ {
			if e[i] == '%' {
				copy(e[i+1:i+3], bytes.ToLower(e[i+1:i+3]))
				i += 2
			}
		}
		return string(e)
	}
	return v
}

// reply returns the HTTP/1 reply that writes e where place says.
func reply(e string, place int) string {
	switch place {
	case placeStatusLine:
		return e + "\r\n\r\n"
	case placeStatusCode:
		return "HTTP/1.1 " + e + "\r\n\r\n"
	case placeMalformedHeader:
		return "HTTP/1.1 200 OK\r\nEcho " + e + "\r\nEcho X-Api-Key: " + e + "\r\n\r\n"
	case placeHeader:
		return "HTTP/1.1 200 OK\r\nX-Echo: " + e + "\r\nKeep-Alive: timeout=5, max=100, echo=" + e +
			"\r\nSet-Cookie: echo=" + e + "\r\nContent-Length: 2\r\n\r\nok"
	case placeTrailer:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Echo\r\n\r\n2\r\nok\r\n0\r\nX-Echo: " + e +
			"\r\nEcho " + e + "\r\n\r\n"
	case placeLocation:
		return "HTTP/1.1 302 Found\r\nLocation: http://[::1" + e + "\r\nContent-Length: 0\r\n\r\n"
	case placeErrorBody:
		return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n" + `{"error": "bad key ` + e + `"}` + "\r\n\r\n"
	}
	return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
}

// echoServer answers every request by sending back the secret it carries
// in the form and place set: plain HTTP/1 on one listener, HTTP/2 over TLS
// (its GOAWAY) on another. Its listeners and connections are closed, and
// its goroutines waited for, by Close.
type echoServer struct {
	plain, tls net.Listener
	cert       *tls.Certificate
	mu         sync.Mutex
	cfg        echo
	conns      map[net.Conn]struct{}
	wg         sync.WaitGroup
}

func newEchoServer(tb testing.TB) *echoServer {
	tb.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	cert := hs.TLS.Certificates[0]
	hs.Close()
	s := &echoServer{cert: &cert, conns: map[net.Conn]struct{}{}}
	var err error
	if s.plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	if s.tls, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	s.wg.Go(func() { s.accept(s.plain, s.serveHTTP1) })
	s.wg.Go(func() { s.accept(s.tls, s.serveH2) })
	return s
}

// URL returns where a request is sent for the place set: the TLS
// listener's for a GOAWAY.
func (s *echoServer) URL(place int) string {
	if place == placeGoAway {
		return "https://" + s.tls.Addr().String()
	}
	return "http://" + s.plain.Addr().String()
}

func (s *echoServer) set(e echo) {
	s.mu.Lock()
	s.cfg = e
	s.mu.Unlock()
}

func (s *echoServer) config() echo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

func (s *echoServer) accept(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			serve(c)
		})
	}
}

// Close stops the server.
func (s *echoServer) Close() {
	s.plain.Close()
	s.tls.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *echoServer) serveHTTP1(c net.Conn) {
	br := bufio.NewReader(io.LimitReader(c, 1<<20))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		cfg := s.config()
		if _, err := io.WriteString(c, reply(encode(carried(req, cfg.carry), cfg.form), cfg.place)); err != nil {
			return
		}
		switch cfg.place {
		case placeStatusLine, placeStatusCode, placeMalformedHeader:
			// A reply net/http may take for a response with a body
			// until EOF (a secret with a colon makes a header line of
			// "Echo …"): the close ends it.
			return
		}
	}
}

// serveH2 answers the first request of an HTTP/2 connection with a GOAWAY
// whose debug data is the secret it carries, and closes the connection.
func (s *echoServer) serveH2(c net.Conn) {
	tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*s.cert}, NextProtos: []string{"h2", "http/1.1"}})
	if tc.Handshake() != nil {
		return
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		// An HTTP/1 client: the same as the plain listener's.
		s.serveHTTP1(tc)
		return
	}
	testserver.ServeH2(tc, func(fr *http2.Framer, f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if !ok {
			return true
		}
		req := &http.Request{Header: http.Header{}, URL: &url.URL{}}
		for _, hf := range h.Fields {
			switch hf.Name {
			case ":path":
				if u, err := url.ParseRequestURI(hf.Value); err == nil {
					req.URL = u
				}
			default:
				if !strings.HasPrefix(hf.Name, ":") {
					req.Header.Add(hf.Name, hf.Value)
				}
			}
		}
		cfg := s.config()
		// The stream is processed (the GOAWAY names it), so the client
		// does not send it again; its end, the connection's EOF, fails
		// it with the GOAWAY's debug data quoted.
		fr.WriteGoAway(h.StreamID, http2.ErrCodeProtocol, []byte(encode(carried(req, cfg.carry), cfg.form)))
		return false
	})
}

// plant returns the arguments that make trace or probe carry secret as
// carry says, the URL last, for a request to base.
func plant(secret string, carry int, base string) (headers []string, target string) {
	u, err := url.Parse(base + "/api/items")
	if err != nil {
		panic(err)
	}
	switch carry {
	case carryHeader:
		headers = []string{"-H", "X-Api-Key: " + secret}
	case carryBearer:
		headers = []string{"-H", "Authorization: Bearer " + secret}
	case carryCookie:
		headers = []string{"-H", "Cookie: sid=" + secret}
	case carryPassword, carryBasic:
		u.User = url.UserPassword("us3r", secret)
	case carryUser:
		u.User = url.UserPassword(secret, "pa55")
	case carryQuery:
		u.RawQuery = url.Values{"token": {secret}, "page": {"2"}}.Encode()
	case carryBareKey:
		u.RawQuery = url.QueryEscape(secret) + "&page=2"
	}
	return headers, u.String()
}

// headerSafe returns s with what a header value cannot hold (control
// characters but tab, DEL) dropped: -H refuses it.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (r < 0x20 && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// secretForms returns the forms in which a leaked secret would show in
// an output, for each way an echo server writes it: as the server wrote it
// (each form above), as net/http or x/net/http2 quote it in an error
// (strconv.Quote, QuoteToASCII) or not, and as the output writes that
// text: as it is, escaped as a terminal line is (redact.Printable's
// escapes: \xNN, \uNNNN), in JSON, Go-quoted (the waterfall's err=%q, slog's
// text handler) and Go-quoted in JSON. Forms of fewer than 3 bytes are
// left out.
func secretForms(secret string, carry int) []string {
	values := []string{secret}
	switch carry {
	case carryPassword, carryBasic:
		// The Basic credentials http.Client makes of the URL's user.
		values = append(values, base64.StdEncoding.EncodeToString([]byte("us3r:"+secret)))
	case carryUser:
		values = append(values, base64.StdEncoding.EncodeToString([]byte(secret+":pa55")))
	}
	quoteInner := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	quoteASCIIInner := func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] }
	jsonInner := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	terminal := func(s string) string {
		// What redact.Printable leaves of s, independently: control
		// characters, C1 controls and invalid UTF-8 escaped.
		var b strings.Builder
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				fmt.Fprintf(&b, `\x%02x`, s[i])
			case r == '\t':
				b.WriteByte('\t')
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029', r == '\ufeff':
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteString(s[i : i+size])
			}
			i += size
		}
		return b.String()
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if len(s) >= 3 && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range values {
		for form := range forms {
			server := encode(v, form)
			for _, quoted := range []string{server, quoteInner(server), quoteASCIIInner(server)} {
				for _, shown := range []string{quoted, terminal(quoted)} {
					add(shown)
					add(jsonInner(shown))
					add(quoteInner(shown))
					add(jsonInner(quoteInner(shown)))
				}
			}
		}
	}
	return out
}
