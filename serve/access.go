package serve

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/connaudit/connaudit/internal/redact"
)

// Who may use the control API (docs/serve.md, "Who may use the control
// API"): a request is answered only when its path begins with the
// server's secret key (/k/{key}, part of CONNAUDIT_URL), its Host names
// this server (a name a DNS rebinding points here is refused), it carries
// no Origin but this server's (no web page's), and a POST's body is JSON
// by its Content-Type (a form or text/plain, which a page may send without
// asking, is refused).

// newKey returns a server's secret key: 128 random bits, in hex.
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// access wraps the control API's routes: it refuses what is not a kit's
// request, strips the key from the path, and masks the key in a POST's
// body, so that a kit's text that quotes CONNAUDIT_URL never carries the
// key into a report.
func (s *Server) access(routes http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowedHost(r.Host) {
			writeErr(w, &apiErr{code: http.StatusMisdirectedRequest, msg: "the Host header does not name this server: " +
				"use CONNAUDIT_URL as given (127.0.0.1, localhost or [::1], and its port)"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.allowedOrigin(o) {
			writeErr(w, &apiErr{code: http.StatusForbidden, msg: "a request from a web page (Origin) is refused: " +
				"the control API answers kits only"})
			return
		}
		path, ok := s.keyed(r.URL)
		if !ok {
			writeErr(w, &apiErr{code: http.StatusNotFound, msg: "not found: the control API's paths begin with " +
				"CONNAUDIT_URL's, key included (" + Protocol + ": docs/serve.md)"})
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = new(url.URL)
		*r2.URL = *r.URL
		r2.URL.Path, r2.URL.RawPath = path, ""
		if r.Method == http.MethodPost {
			if !jsonType(r.Header.Get("Content-Type")) {
				writeErr(w, &apiErr{code: http.StatusUnsupportedMediaType, msg: "a POST's body must be JSON, " +
					"with Content-Type: application/json (" + Protocol + ")"})
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				writeErr(w, badRequest("reading the body: %v", err))
				return
			}
			if len(body) <= maxBody {
				body = bytes.ReplaceAll(body, []byte(s.key), []byte(redact.Masked))
			}
			r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		routes.ServeHTTP(w, r2)
	})
}

// keyed returns the path of u below the key's prefix /k/{key}, and whether
// u has that prefix; the key is compared in constant time.
func (s *Server) keyed(u *url.URL) (string, bool) {
	rest, found := strings.CutPrefix(u.Path, "/k/")
	key, tail, _ := strings.Cut(rest, "/")
	if !found || subtle.ConstantTimeCompare([]byte(key), []byte(s.key)) != 1 {
		return "", false
	}
	if u.RawPath != "" && !strings.HasPrefix(u.RawPath, "/k/"+s.key+"/") {
		return "", false
	}
	return "/" + tail, true
}

// allowedHost reports whether host (a request's Host header) names this
// server: a loopback address or localhost, or the host the control API
// was told to listen on, with the listener's port (which may go unsaid
// when it is 80). An address that listens on every interface accepts any
// IP address (no name: a name is what a DNS rebinding changes).
func (s *Server) allowedHost(host string) bool {
	_, port, err := net.SplitHostPort(s.ctl.Addr().String())
	if err != nil {
		return false
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.Trim(host, "[]"), "80"
	}
	if p != port {
		return false
	}
	ip := net.ParseIP(h)
	if strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback() {
		return true
	}
	given, _, _ := net.SplitHostPort(s.cfg.addr)
	gip := net.ParseIP(given)
	switch {
	case given != "" && strings.EqualFold(h, given):
		return true
	case ip != nil && gip != nil && gip.IsUnspecified():
		return true
	}
	return false
}

// allowedOrigin reports whether origin is this server's own.
func (s *Server) allowedOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Path == "" && s.allowedHost(u.Host)
}

// jsonType reports whether a Content-Type is JSON: application/json, with
// at most a charset, UTF-8.
func jsonType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}
