package httptrace_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

// fuzzClasses are the declared outcome classes: Classify returns one of
// them and nothing else.
var fuzzClasses = map[httptrace.Class]bool{
	vocab.ClassOK: true, vocab.ClassConnectRefused: true, vocab.ClassConnectTimeout: true,
	vocab.ClassConnect: true, vocab.ClassDNS: true, vocab.ClassTLSHandshakeTimeout: true,
	vocab.ClassTLS: true, vocab.ClassResponseHeaderTimeout: true, vocab.ClassDeadline: true,
	vocab.ClassCanceled: true, vocab.ClassServerClosed: true, vocab.ClassReset: true,
	vocab.ClassBodyTruncated: true, vocab.ClassBodyIdleTimeout: true, vocab.ClassGoAway: true,
	vocab.ClassStreamReset: true, vocab.ClassProtocol: true, vocab.ClassTimeout: true,
	vocab.ClassError: true,
}

var fuzzStages = []httptrace.Stage{"", vocab.StagePoolWait, vocab.StageDNS, vocab.StageConnect, vocab.StageTLS,
	vocab.StageWrite, vocab.StageAwaitHeaders, vocab.StageBody}

// stageGroup names the classes between which only the stage may decide:
// an unexpected EOF is a truncated body in the body and a server that
// closed before it otherwise; a bare timeout is named after the stage it
// hit.
func stageGroup(c httptrace.Class) httptrace.Class {
	switch c {
	case vocab.ClassBodyTruncated, vocab.ClassServerClosed:
		return "eof"
	case vocab.ClassConnectTimeout, vocab.ClassTLSHandshakeTimeout, vocab.ClassTimeout:
		return "timeout"
	}
	return c
}

// fuzzNetErr is a net.Error such as net/http's unexported timeout errors.
type fuzzNetErr struct {
	msg     string
	timeout bool
}

func (e *fuzzNetErr) Error() string   { return e.msg }
func (e *fuzzNetErr) Timeout() bool   { return e.timeout }
func (e *fuzzNetErr) Temporary() bool { return false }

// knownTexts are error texts net/http, http2 and crypto/tls produce.
var knownTexts = []string{
	"net/http: TLS handshake timeout",
	"net/http: timeout awaiting response headers",
	"http2: timeout awaiting response headers",
	"http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=\"\"",
	"stream error: stream ID 1; INTERNAL_ERROR; received from peer",
	"http: server closed idle connection",
	"net/http: HTTP/1.x transport connection broken: malformed HTTP response \"\\x00\"",
	"malformed HTTP status code \"x\"",
	"net/http: server response headers exceeded 1048576 bytes; aborted",
	"readLoopPeekFailLocked: EOF",
	"tls: first record does not look like a TLS handshake",
	"remote error: tls: bad certificate",
	"net/http: request canceled while waiting for connection",
}

// buildErr builds an error chain from data: a small stack machine whose
// opcodes push leaves (sentinels, errnos, TLS and x509 errors, DNS errors,
// net.Errors, texts from text) and wrap or join what is on the stack. The
// chain's expanded size is bounded, so errors.Is stays cheap on errors that
// share parts (errors.Join(e, e) doubles the walk).
func buildErr(data []byte, text string) error {
	type node struct {
		err  error
		size int
	}
	var stack []node
	pos := 0
	next := func() byte {
		if pos >= len(data) {
			return 0
		}
		b := data[pos]
		pos++
		return b
	}
	tpos := 0
	piece := func() string { // the next piece of text, of a length data gives
		n := int(next()) % 24
		if tpos >= len(text) {
			return ""
		}
		end := min(len(text), tpos+n)
		s := text[tpos:end]
		tpos = end
		return s
	}
	pop := func() node {
		if len(stack) == 0 {
			return node{err: errors.New(piece()), size: 1}
		}
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return n
	}
	const maxSize = 200
	push := func(err error, size int) {
		if size > maxSize {
			err, size = errors.New("too big"), 1
		}
		stack = append(stack, node{err, size})
	}
	for steps := 0; pos < len(data) && steps < 64; steps++ {
		switch op := next() % 30; op {
		case 0:
			push(io.EOF, 1)
		case 1:
			push(io.ErrUnexpectedEOF, 1)
		case 2:
			push(context.Canceled, 1)
		case 3:
			push(context.DeadlineExceeded, 1)
		case 4:
			push(httptrace.ErrBodyIdleTimeout, 1)
		case 5:
			push([]syscall.Errno{syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE, syscall.ECONNABORTED,
				syscall.ETIMEDOUT, syscall.EHOSTUNREACH}[next()%6], 1)
		case 6:
			push(os.ErrDeadlineExceeded, 1)
		case 7:
			push(tls.RecordHeaderError{Msg: piece()}, 1)
		case 8:
			push(tls.AlertError(next()), 1)
		case 9:
			push(x509.UnknownAuthorityError{}, 1)
		case 10:
			push(x509.HostnameError{Certificate: &x509.Certificate{}, Host: piece()}, 1)
		case 11:
			push(x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.InvalidReason(next() % 12), Detail: piece()}, 1)
		case 12:
			in := pop()
			push(&tls.CertificateVerificationError{Err: in.err}, in.size+1)
		case 13:
			push(errors.New(piece()), 1)
		case 14:
			push(&fuzzNetErr{msg: piece(), timeout: next()&1 != 0}, 1)
		case 15:
			b := next()
			push(&net.DNSError{Err: piece(), Name: piece(), IsTimeout: b&1 != 0, IsNotFound: b&2 != 0}, 1)
		case 16:
			push(errors.New(knownTexts[int(next())%len(knownTexts)]), 1)
		case 17, 18:
			in := pop()
			push(fmt.Errorf("%s: %w", piece(), in.err), in.size+1)
		case 19, 20:
			in := pop()
			ops := []string{"dial", "read", "write", "remote error", ""}
			push(&net.OpError{Op: ops[int(next())%len(ops)], Net: "tcp", Err: in.err}, in.size+1)
		case 21:
			in := pop()
			push(os.NewSyscallError(piece(), in.err), in.size+1)
		case 22:
			in := pop()
			push(&url.Error{Op: "Get", URL: "http://127.0.0.1:1/" + piece(), Err: in.err}, in.size+1)
		case 23:
			in := pop()
			push(&net.DNSError{Err: piece(), Name: "localhost", UnwrapErr: in.err}, in.size+1)
		case 24, 25:
			a, b := pop(), pop()
			push(errors.Join(a.err, b.err), a.size+b.size+1)
		case 26:
			a, b := pop(), pop()
			push(fmt.Errorf("%w; %w", a.err, b.err), a.size+b.size+1)
		case 27: // the same error twice: a DAG, not a tree
			in := pop()
			push(errors.Join(in.err, in.err), 2*in.size+1)
		case 28:
			push(fmt.Errorf("%s", piece()), 1) // no wrapping
		case 29:
			push(&os.PathError{Op: "read", Path: piece(), Err: pop().err}, 1)
		}
	}
	if len(stack) == 0 {
		return nil
	}
	// Join what is left, as a Transport's error may carry several.
	errs := make([]error, len(stack))
	size := 0
	for i, n := range stack {
		errs[i] = n.err
		size += n.size
	}
	if len(errs) == 1 {
		return errs[0]
	}
	if size > maxSize {
		return errs[len(errs)-1]
	}
	return errors.Join(errs...)
}

// FuzzClassify checks the outcome classifier over arbitrary error chains
// and stages. Invariants: it never panics; it returns a declared class,
// ok for nil and only for nil, the same class each time; the stage only
// decides between the classes documented to depend on it; wrapping the
// error with %w or joining it alone changes nothing; ErrBodyIdleTimeout in
// the chain wins, then context.Canceled; ClassifyContext is Classify for a
// live or nil context, and for a context that ended it is canceled
// (body-idle-timeout when that is the cause or in the chain) or deadline.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{}, "")
	f.Add([]byte{0}, "")                                     // EOF
	f.Add([]byte{1}, "")                                     // unexpected EOF: stage decides
	f.Add([]byte{5, 1, 19, 0}, "")                           // dial: ECONNREFUSED
	f.Add([]byte{14, 5, 1, 19, 0}, "i/o timeout")            // dial timeout
	f.Add([]byte{14, 5, 1, 19, 1}, "i/o timeout")            // read timeout: stage decides
	f.Add([]byte{15, 3, 0, 9}, "no such hostlocalhost")      // DNS
	f.Add([]byte{2, 4, 24}, "")                              // canceled and idle timeout joined
	f.Add([]byte{4, 17, 5}, "read")                          // idle timeout wrapped
	f.Add([]byte{9, 12, 22}, "")                             // x509 through tls and url.Error
	f.Add([]byte{5, 0, 21, 4, 19, 1, 22}, "readfoo")         // ECONNRESET, wrapped thrice
	f.Add([]byte{16, 3}, "")                                 // GOAWAY text
	f.Add([]byte{13, 10}, "tls: handshake failure")          // tls text
	f.Add([]byte{3, 27, 27, 27, 27, 27, 27, 27, 27, 27}, "") // a deep DAG of deadlines
	f.Add([]byte{16, 0, 16, 6, 26, 14, 9, 25}, "x: invalid") // mixed
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		err := buildErr(data, text)
		ctx := context.Background()
		for _, stage := range fuzzStages {
			c := httptrace.Classify(err, stage)
			if !fuzzClasses[c] {
				t.Fatalf("Classify(%v, %q) = %q: not a declared class", err, stage, c)
			}
			if c2 := httptrace.Classify(err, stage); c2 != c {
				t.Fatalf("Classify not deterministic: %q then %q", c, c2)
			}
			if (c == vocab.ClassOK) != (err == nil) {
				t.Fatalf("Classify(%v, %q) = %q", err, stage, c)
			}
			if err == nil {
				if got := vocab.ClassifyContext(canceledCtx(nil), nil, stage); got != vocab.ClassOK {
					t.Fatalf("ClassifyContext(canceled, nil) = %q, want ok", got)
				}
				continue
			}
			if c0 := httptrace.Classify(err, vocab.StagePoolWait); stageGroup(c) != stageGroup(c0) {
				t.Fatalf("Classify(%v): %q at %q but %q at pool-wait: the stage decided more than documented", err, c, stage, c0)
			}
			if w := httptrace.Classify(fmt.Errorf("op: %w", err), stage); w != c {
				t.Fatalf("wrapping changed the class: %q, wrapped %q (%v)", c, w, err)
			}
			if j := httptrace.Classify(errors.Join(err), stage); j != c {
				t.Fatalf("errors.Join(err) changed the class: %q, joined %q (%v)", c, j, err)
			}
			idle := errors.Is(err, httptrace.ErrBodyIdleTimeout)
			switch {
			case idle && c != vocab.ClassBodyIdleTimeout:
				t.Fatalf("Classify(%v) = %q, want body-idle-timeout: ErrBodyIdleTimeout is in the chain", err, c)
			case !idle && errors.Is(err, context.Canceled) && c != vocab.ClassCanceled:
				t.Fatalf("Classify(%v) = %q, want canceled: context.Canceled is in the chain", err, c)
			}
			for _, live := range []context.Context{nil, ctx} {
				if got := vocab.ClassifyContext(live, err, stage); got != c {
					t.Fatalf("ClassifyContext(live, %v) = %q, Classify = %q", err, got, c)
				}
			}
			for _, cause := range []error{nil, httptrace.ErrBodyIdleTimeout, err, errors.New("gone")} {
				want := vocab.ClassCanceled
				if idle || (cause != nil && errors.Is(cause, httptrace.ErrBodyIdleTimeout)) {
					want = vocab.ClassBodyIdleTimeout
				}
				if got := vocab.ClassifyContext(canceledCtx(cause), err, stage); got != want {
					t.Fatalf("ClassifyContext(canceled with cause %v, %v) = %q, want %q", cause, err, got, want)
				}
			}
			want := vocab.ClassDeadline
			if idle {
				want = vocab.ClassBodyIdleTimeout
			}
			dctx, cancel := context.WithDeadline(ctx, time.Unix(1, 0))
			got := vocab.ClassifyContext(dctx, err, stage)
			cancel()
			if got != want {
				t.Fatalf("ClassifyContext(deadline passed, %v) = %q, want %q", err, got, want)
			}
		}
	})
}

func canceledCtx(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

// redactSecrets returns the secrets of u: its password, its query values
// and its query keys written without a value, each as decoded and as
// written in the URL, at least 3 bytes long. Query values are split on &
// and ; whether or not the query parses.
func redactSecrets(u *url.URL) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 {
			out = append(out, s)
		}
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			_, raw, _ := strings.Cut(u.User.String(), ":")
			add(raw)
		}
	}
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			v = k // a key without a value may be the secret itself
		}
		add(v)
		if d, err := url.QueryUnescape(v); err == nil {
			add(d)
		}
	}
	return out
}

// withoutSecrets returns a copy of u whose password and query values are
// all "REDACTED", the rest unchanged: what u shows once redacted, so that
// text the redaction itself makes (such as "?=R" in "next?=REDACTED") is
// not taken for a secret.
func withoutSecrets(u *url.URL) *url.URL {
	c := *u
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			c.User = url.UserPassword(u.User.Username(), redact.Masked)
		}
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, pair := range pairs {
			var parts []string
			for _, sub := range strings.Split(pair, ";") {
				k, _, ok := strings.Cut(sub, "=")
				switch {
				case ok:
					k += "=" + redact.Masked
				case k != "":
					k = redact.Masked // a key without a value is masked whole
				}
				parts = append(parts, k)
			}
			pairs[i] = strings.Join(parts, ";")
		}
		c.RawQuery = strings.Join(pairs, "&")
	}
	return &c
}

// stripPassword is net/http's form of a URL in a *url.Error.
func stripPassword(u *url.URL) string {
	if _, ok := u.User.Password(); ok {
		return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return u.String()
}

// redactTemplates are errors that quote a request URL, or its parts, the
// ways net/http and callers do.
func redactTemplates(u *url.URL, noise string) []error {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	p, _ := u.User.Password()
	var values []string
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			v = k
		}
		if d, err := url.QueryUnescape(v); err == nil {
			v = d
		}
		values = append(values, v)
	}
	return []error{
		// http.Client: the URL with the password starred.
		&url.Error{Op: "Get", URL: stripPassword(u), Err: refused},
		// A caller quoting the URL whole.
		fmt.Errorf("fetching %s: %w", u, refused),
		// A server echoing the request line, which the Transport quotes
		// in its error ("malformed HTTP status code").
		fmt.Errorf("net/http: HTTP/1.x transport connection broken: malformed HTTP status code %q", u.RequestURI()),
		// A redirect that kept the query, to a URL that is not u.
		&url.Error{Op: "Get", URL: "http://127.0.0.1:1/next?" + u.RawQuery, Err: refused},
		// The secrets alone, and around noise.
		fmt.Errorf("auth %s: %s %s", p, strings.Join(values, ","), noise),
		errors.New(noise + u.String() + noise),
	}
}

// FuzzRedact checks RedactURLString, RedactURL and RedactError on arbitrary
// URLs. Invariants: they never panic; a URL that does not parse is masked
// whole; the redacted URL does not depend on the password or the query
// values (so it cannot show them) when the query parses; and no output
// shows a password or a query value (as decoded or as written, of 3 bytes or
// more) unless that string is also part of what the output shows when the
// URL has no secrets at all (its host, path, keys, the templates' own text,
// "REDACTED"), which would make a finding a false positive.
func FuzzRedact(f *testing.F) {
	f.Add("http://user:S3cr3tPassw0rd@127.0.0.1:8080/p?token=T0kenValue&page=2", "")
	f.Add("https://u:p%40ss%2Fword@localhost/a%2Fb?token=a%2Fb%20c&x=y+z#frag", "noise")
	f.Add("http://127.0.0.1/?token=abc;def=ghi", "")
	f.Add("http://:pw@[::1]:80/?a=%zz", "")
	f.Add("http://u@127.0.0.1/?t=value&t=value2&&=x", "value")
	f.Add("http:opaque?token=secret", "")
	f.Add("//127.0.0.1/p?token=secret", "")
	f.Add("http://user:REDACTED@127.0.0.1/?k=RED", "")
	f.Add("http://127.0.0.1/p?SESSIONTOKEN&a=1&bb", "")
	f.Add("ht tp://user:pw@x/", "")
	f.Fuzz(func(t *testing.T, raw, noise string) {
		out := redact.URLString(raw)
		u, err := url.Parse(raw)
		if err != nil {
			if out != redact.Masked {
				t.Fatalf("RedactURLString(%q) = %q for a URL that does not parse", raw, out)
			}
			return
		}
		if got := redact.URL(u); got != out {
			t.Fatalf("RedactURL %q != RedactURLString %q", got, out)
		}
		if redact.URL(nil) != "" || redact.Error(nil, u) != "" {
			t.Fatal("nil in, something out")
		}
		clean := withoutSecrets(u)
		cleanOut := redact.URL(clean)
		if _, qerr := url.ParseQuery(u.RawQuery); qerr == nil && cleanOut != out {
			t.Fatalf("the redacted URL depends on the secrets: %q, without them %q", out, cleanOut)
		}
		secrets := redactSecrets(u)
		// leak fails when out shows a secret that the output without
		// secrets (cleanOut, built the same way) does not.
		leak := func(what, out, cleanOut string) {
			for _, s := range secrets {
				if strings.Contains(out, s) && !strings.Contains(cleanOut, s) && !strings.Contains(clean.String(), s) &&
					!strings.Contains(redact.Masked, s) {
					t.Fatalf("%s shows secret %q of %q: %q", what, s, raw, out)
				}
			}
		}
		leak("RedactURL", out, cleanOut)
		errs, cleanErrs := redactTemplates(u, noise), redactTemplates(clean, noise)
		for i, e := range errs {
			if got := redact.Error(e, nil); got != redact.Printable(e.Error()) {
				t.Fatalf("RedactError(err, nil) = %q, want the error's text %q, printable", got, e.Error())
			}
			leak(fmt.Sprintf("RedactError (template %d)", i), redact.Error(e, u), redact.Error(cleanErrs[i], clean))
		}
	})
}
