package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/pool"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"
)

// headerFlags collects repeatable -H "Name: value" flags.
type headerFlags []string

func (h *headerFlags) String() string { return fmt.Sprintf("%d header(s)", len(*h)) }

// Set keeps v; [requestFlags.validate] checks it. The flag package quotes
// the value of a flag whose Set fails in its error, and a header's value
// (a credential, often) must never be printed.
func (h *headerFlags) Set(v string) error {
	*h = append(*h, v)
	return nil
}

// requestFlags are the flags that shape a request, shared by trace and
// probe; they follow curl where curl has one.
type requestFlags struct {
	method   string
	headers  headerFlags
	data     string
	insecure bool
	http1    bool
	http2    bool
	timeout  time.Duration
	maxBody  int64
	head     bool // -I, as curl's: the method HEAD
	silent   bool // -s, as curl's: no progress line, no warning
}

func (rf *requestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&rf.method, "X", "", "request method (default GET, or POST with -d)")
	fs.Var(&rf.headers, "H", `request header "Name: value" (repeatable); values are never printed (see above)`)
	fs.StringVar(&rf.data, "d", "", "request body, or @file to read it from a file")
	fs.BoolVar(&rf.insecure, "k", false, "skip TLS certificate verification (warns)")
	fs.BoolVar(&rf.http1, "http1", false, "use HTTP/1.1 only")
	fs.BoolVar(&rf.http2, "http2", false, "require HTTP/2 (over TLS)")
	fs.DurationVar(&rf.timeout, "timeout", defaultTimeout, "bound on each request, body included")
	fs.Int64Var(&rf.maxBody, "max-body", 64<<20, "read at most this many body bytes per response")
	fs.BoolVar(&rf.head, "I", false, "send HEAD, as curl -I does (-X HEAD)")
	fs.BoolVar(&rf.silent, "s", false, "quiet, as curl -s: no progress line, no warning; a failure is still one line on stderr")
}

// warn writes a warning on stderr, unless -s.
func (rf *requestFlags) warn(stderr io.Writer, format string, args ...any) {
	if !rf.silent {
		fmt.Fprintf(stderr, format+"\n", args...)
	}
}

// parseHeader splits "Name: value" and checks both parts.
func parseHeader(v string) (string, string, error) {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return "", "", errors.New(`header must be "Name: value"`)
	}
	name = strings.TrimSpace(name)
	value = strings.TrimSpace(value)
	if !httpguts.ValidHeaderFieldName(name) {
		return "", "", fmt.Errorf("invalid header name %q", name)
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return "", "", fmt.Errorf("invalid value for header %s", name)
	}
	return name, value, nil
}

// parseTarget checks that raw is an absolute http or https URL with a host.
// A URL written without a scheme ("example.com:8080/p", as curl takes it)
// is an http one.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(withScheme(raw))
	if err != nil {
		return nil, malformedURL(err)
	}
	if u.Opaque != "" {
		// "user:password@host" or "host:port" without a scheme parses
		// as the scheme "user" or "host" and an opaque rest, and
		// "http:user:password@host" as an opaque http URL: quote neither.
		return nil, errors.New("malformed URL: want http://host/ or https://host/")
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, fmt.Errorf("URL scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		// Quote none of it: what would be the host may have been taken
		// for the path ("http:///user:pw@host").
		return nil, errors.New("malformed URL: no host")
	}
	if h := u.Hostname(); !isASCII(h) {
		// net/http converts a host name that is not ASCII to its
		// ASCII form (IDNA) before it dials or writes the request; a
		// name it cannot convert would fail every request: refuse it
		// here, in fixed words.
		if strings.HasPrefix(u.Host, "[") {
			return nil, errors.New("malformed URL: invalid IPv6 zone")
		}
		if _, err := idna.Lookup.ToASCII(h); err != nil {
			return nil, errors.New("malformed URL: host is not a valid internationalized domain name")
		}
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("URL port %q is out of range", p)
		}
	}
	return u, nil
}

// withScheme returns raw with "http://" in front when it names no scheme:
// when it has no "scheme://" and does not begin "http:" or "https:" (a
// malformed http URL, refused as such). "host:port" and
// "user:password@host" parse as a scheme and an opaque rest: the scheme
// is judged by its "://" instead.
func withScheme(raw string) string {
	if i := strings.Index(raw, "://"); i > 0 && validScheme(raw[:i]) {
		return raw
	}
	lower := strings.ToLower(raw)
	if strings.HasPrefix(lower, "http:") || strings.HasPrefix(lower, "https:") {
		return raw
	}
	if strings.HasPrefix(raw, "//") {
		return "http:" + raw
	}
	return "http://" + raw
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.').
func validScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// isASCII reports whether s is ASCII alone.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// malformedURL is the error for a URL that net/url refused. net/url's
// errors quote the URL or parts of it, which may be the password or a
// query value (a password holding a '#', '/' or '?' ends the authority
// there: "invalid port \":hunter2\" after host"): this one says what is
// wrong in fixed words, and quotes nothing.
func malformedURL(err error) error {
	var (
		escape url.EscapeError
		host   url.InvalidHostError
	)
	switch {
	case errors.As(err, &escape):
		return errors.New("malformed URL: invalid percent-escape")
	case errors.As(err, &host):
		return errors.New("malformed URL: invalid character in host name")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := strings.TrimPrefix(err.Error(), "net/url: ")
	for _, reason := range []string{
		"invalid port",
		"invalid host",
		"invalid IP-literal",
		"missing ']' in host",
		"invalid userinfo",
		"invalid control character in URL",
		"missing protocol scheme",
		"first path segment in URL cannot contain colon",
		"empty url",
	} {
		if strings.HasPrefix(msg, reason) {
			return errors.New("malformed URL: " + reason)
		}
	}
	return errors.New("malformed URL")
}

// validate checks flag values that the flag package cannot.
func (rf *requestFlags) validate() error {
	if rf.http1 && rf.http2 {
		return errors.New("-http1 and -http2 exclude each other")
	}
	if rf.timeout <= 0 {
		return fmt.Errorf("-timeout %v must be positive", rf.timeout)
	}
	if rf.maxBody < 0 {
		return fmt.Errorf("-max-body %d must not be negative", rf.maxBody)
	}
	if rf.method != "" && !validMethod(rf.method) {
		return fmt.Errorf("invalid method %q", rf.method)
	}
	if rf.head && rf.method != "" && rf.method != http.MethodHead {
		return fmt.Errorf("-I (HEAD) and -X %s ask for two methods", rf.method)
	}
	if rf.head && rf.data != "" {
		return errors.New("-I sends HEAD, which carries no body: drop -d")
	}
	for _, h := range rf.headers {
		if _, _, err := parseHeader(h); err != nil {
			return fmt.Errorf("-H: %w", err)
		}
	}
	return nil
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if !httpguts.IsTokenRune(c) {
			return false
		}
	}
	return true
}

// body returns the request body the -d flag asks for.
func (rf *requestFlags) body() ([]byte, error) {
	if rf.data == "" {
		return nil, nil
	}
	if name, ok := strings.CutPrefix(rf.data, "@"); ok {
		b, err := readUserFile(name, maxBodyFile)
		if err != nil {
			return nil, fmt.Errorf("-d: %w", err)
		}
		return b, nil
	}
	return []byte(rf.data), nil
}

// request builds the request the flags describe for rawURL.
func (rf *requestFlags) request(ctx context.Context, rawURL string) (*http.Request, error) {
	if err := rf.validate(); err != nil {
		return nil, err
	}
	u, err := parseTarget(rawURL)
	if err != nil {
		return nil, err
	}
	if rf.http2 && u.Scheme != "https" {
		return nil, errors.New("-http2 needs an https URL")
	}
	body, err := rf.body()
	if err != nil {
		return nil, err
	}
	method := rf.method
	switch {
	case rf.head:
		method = http.MethodHead
	case method == "":
		method = http.MethodGet
		if body != nil {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		// net/url may refuse the URL it printed ("http://[::%25%87]"):
		// its error, like url.Parse's, quotes parts of it.
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("building the request: %w", malformedURL(ue))
		}
		return nil, fmt.Errorf("building the request: %s", redact.Error(err, u))
	}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	for _, h := range rf.headers {
		name, value, _ := parseHeader(h)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	return req, nil
}

// secretHeaders returns the names of the -H headers: their values are
// never printed, even when a server quotes them back.
func (rf *requestFlags) secretHeaders() []string {
	var names []string
	for _, h := range rf.headers {
		if name, _, err := parseHeader(h); err == nil && !strings.EqualFold(name, "Host") {
			names = append(names, name)
		}
	}
	return names
}

// redact returns err's text for req with every secret masked: the URL's,
// the credentials in req's header and the values of the -H headers.
func (rf *requestFlags) redact(err error, req *http.Request) string {
	return redact.RequestError(err, req, rf.secretHeaders()...)
}

// poolOptions returns the pool options the flags ask for.
func (rf *requestFlags) poolOptions() []pool.Option {
	var opts []pool.Option
	if names := rf.secretHeaders(); len(names) > 0 {
		opts = append(opts, pool.SecretHeaders(names...))
	}
	if rf.http1 {
		var http1 http.Protocols
		http1.SetHTTP1(true)
		opts = append(opts, pool.Protocols(http1))
	}
	if rf.insecure {
		opts = append(opts, pool.TLSClientConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // asked for with -k, warned about
	}
	return opts
}
