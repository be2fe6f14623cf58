package otelconnaudit

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of connaudit's own span attributes.
const (
	connIDKey      = attribute.Key("connaudit.conn.id")
	connNewKey     = attribute.Key("connaudit.conn.new")
	closedEarlyKey = attribute.Key("connaudit.body.closed_early")
)

// Span names. The connection's stages are named as .NET names its own
// (HTTP wait_for_connection, DNS lookup, socket connect, TLS client
// handshake), the request's after what they time.
const (
	spanWait     = "HTTP wait_for_connection"
	spanDNS      = "DNS lookup"
	spanConnect  = "socket connect"
	spanTLS      = "TLS client handshake"
	spanWrite    = "HTTP write_request"
	spanResponse = "HTTP wait_for_response"
	spanBody     = "HTTP read_response_body"
)

// marks are the offsets of a timeline's events that bound its stages, -1
// for an event that did not happen; late events are left out.
type marks struct {
	getConn, gotConn, dnsStart, dnsDone, tlsStart, tlsDone time.Duration
	wroteHeaders, wrote, first, eof, closed, done          time.Duration
	dnsErr, tlsErr                                         error
}

// connectTry is one dial to one address.
type connectTry struct {
	addr       string
	start, end time.Duration
	err        error
}

func scan(tl *httptrace.Timeline) (m marks, tries []connectTry) {
	m = marks{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, nil, nil}
	for i := range tl.Events {
		e := &tl.Events[i]
		if e.Late {
			continue
		}
		switch e.Kind {
		case vocab.KindGetConn:
			if m.getConn < 0 {
				m.getConn = e.At
			}
		case vocab.KindGotConn:
			m.gotConn = e.At
		case vocab.KindDNSStart:
			if m.dnsStart < 0 {
				m.dnsStart = e.At
			}
		case vocab.KindDNSDone:
			m.dnsDone, m.dnsErr = e.At, e.Err
		case vocab.KindConnectStart:
			tries = append(tries, connectTry{addr: e.Addr, start: e.At, end: -1})
		case vocab.KindConnectDone:
			for j := range tries {
				if t := &tries[j]; t.addr == e.Addr && t.end < 0 {
					t.end, t.err = e.At, e.Err
					break
				}
			}
		case vocab.KindTLSStart:
			if m.tlsStart < 0 {
				m.tlsStart = e.At
			}
		case vocab.KindTLSDone:
			m.tlsDone, m.tlsErr = e.At, e.Err
		case vocab.KindWroteHeaders:
			m.wroteHeaders = e.At
		case vocab.KindWroteRequest:
			m.wrote = e.At
		case vocab.KindFirstByte:
			if m.first < 0 {
				m.first = e.At
			}
		case vocab.KindBodyEOF:
			m.eof = e.At
		case vocab.KindBodyClose:
			m.closed = e.At
		case vocab.KindDone:
			m.done = e.At
		}
	}
	return m, tries
}

// written returns when the request counts as written, as
// [httptrace.Timeline.Timings] does: HTTP/2 may report it only after the
// response came, when its headers written stand for it, or else the
// connection; -1 if it was not written.
func (m *marks) written() time.Duration {
	w := m.wrote
	if w < 0 || (m.first >= 0 && w > m.first) {
		switch {
		case m.wroteHeaders >= 0 && (m.first < 0 || m.wroteHeaders <= m.first):
			w = m.wroteHeaders
		case m.first >= 0 && m.gotConn >= 0 && m.gotConn <= m.first:
			w = m.gotConn
		}
	}
	return w
}

// stageSpans makes the spans of one request from its timeline, after the
// events, with their recorded times: a span is started and ended in the
// same call, so that no hook firing late, no stream of HTTP/2 and no body
// left unread can leave one open or end one twice.
type stageSpans struct {
	o        *Observer
	tl       *httptrace.Timeline
	m        marks
	tries    []connectTry
	failed   vocab.Stage // the stage the request failed in, if it did
	addr     string      // server.address
	port     int
	hostPort string
}

func (o *Observer) newStageSpans(tl *httptrace.Timeline) *stageSpans {
	s := &stageSpans{o: o, tl: tl}
	s.m, s.tries = scan(tl)
	if tl.Finished && tl.Outcome.Class != vocab.ClassOK {
		s.failed = tl.Outcome.Stage
	}
	u := tl.RawURL()
	host := u.Host
	if host == "" {
		host = tl.Host
	}
	s.addr, s.port = serverAddr(u.Scheme, host)
	s.hostPort = net.JoinHostPort(s.addr, strconv.Itoa(s.port))
	return s
}

// sampled reports whether ctx carries a span whose trace is sampled:
// stages go under the caller's span, and follow its sampling decision.
func sampled(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsSampled()
}

func (s *stageSpans) at(d time.Duration) trace.SpanStartEventOption {
	return trace.WithTimestamp(s.tl.Start.Add(d))
}

// span records one stage from start to end (offsets), under ctx, with kv;
// it fails if the request failed in stage, or with errTyp when the stage
// itself failed (a refused address among several). It returns the span's
// context for children.
func (s *stageSpans) span(ctx context.Context, name string, start, end time.Duration, stage vocab.Stage, errTyp string, kv ...attribute.KeyValue) context.Context {
	end = max(end, start)
	ctx, sp := s.o.tracer.Start(ctx, name, s.at(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...))
	switch {
	case stage != "" && stage == s.failed:
		sp.SetAttributes(semconv.ErrorTypeKey.String(string(s.tl.Outcome.Class)))
		sp.SetStatus(codes.Error, s.tl.RedactError(s.tl.Outcome.Err))
	case errTyp != "":
		sp.SetAttributes(semconv.ErrorTypeKey.String(errTyp))
		sp.SetStatus(codes.Error, errTyp)
	}
	sp.End(trace.WithTimestamp(s.tl.Start.Add(end)))
	return ctx
}

// end returns e, or the request's end when the stage never ended (it
// failed, or the request ended while it went on), or -1 when the request
// has not ended either.
func (s *stageSpans) end(e time.Duration) time.Duration {
	if e >= 0 {
		return e
	}
	return s.m.done
}

// headerSpans exports the stages up to the response headers: the wait for
// a connection (with the DNS lookup, connects and TLS handshake of a dial
// made for the request), writing the request and waiting for the response.
func (o *Observer) headerSpans(ctx context.Context, tl *httptrace.Timeline) {
	if !sampled(ctx) {
		return
	}
	s := o.newStageSpans(tl)
	m := &s.m
	if m.getConn >= 0 {
		var buf [4]time.Duration
		waited := len(queued(tl, buf[:0])) > 0
		if end := s.end(m.gotConn); end >= 0 && (waited || m.gotConn < 0) {
			dctx := s.span(ctx, spanWait+" "+s.hostPort, m.getConn, end, vocab.StagePoolWait, "",
				semconv.ServerAddressKey.String(s.addr), semconv.ServerPortKey.Int(s.port))
			s.dialSpans(dctx)
		}
	}
	if m.gotConn < 0 {
		return
	}
	conn := []attribute.KeyValue{connIDKey.Int64(int64(tl.Conn.ID)), connNewKey.Bool(tl.Conn.New())}
	if tl.Retries > 0 {
		conn = append(conn, semconv.HTTPRequestResendCountKey.Int(tl.Retries))
	}
	w := m.written()
	if end := s.end(w); end >= 0 {
		s.span(ctx, spanWrite, m.gotConn, end, vocab.StageWrite, "", conn...)
	}
	if w < 0 {
		return
	}
	if end := s.end(m.first); end >= 0 {
		s.span(ctx, spanResponse, w, end, vocab.StageAwaitHeaders, "", conn[:1]...)
	}
}

// dialSpans exports the DNS lookup, the connects and the TLS handshake of
// the dial made for the request, under ctx.
func (s *stageSpans) dialSpans(ctx context.Context) {
	m := &s.m
	if m.dnsStart >= 0 {
		if end := s.end(m.dnsDone); end >= 0 {
			host := s.tl.DNS.Host
			if host == "" {
				host = s.addr
			}
			s.span(ctx, spanDNS+" "+host, m.dnsStart, end, vocab.StageDNS, errType(m.dnsErr, vocab.StageDNS),
				semconv.DNSQuestionNameKey.String(host))
		}
	}
	for i, t := range s.tries {
		end := s.end(t.end)
		if end < 0 {
			continue
		}
		stage := vocab.Stage("")
		if i == len(s.tries)-1 {
			stage = vocab.StageConnect // the request failed in its last connect, if at all
		}
		kv := []attribute.KeyValue{semconv.NetworkTransportKey.String("tcp")}
		if h, p, err := net.SplitHostPort(t.addr); err == nil {
			kv = append(kv, semconv.NetworkPeerAddressKey.String(h))
			if n, err := strconv.Atoi(p); err == nil {
				kv = append(kv, semconv.NetworkPeerPortKey.Int(n))
			}
		}
		s.span(ctx, spanConnect+" "+t.addr, t.start, end, stage, errType(t.err, vocab.StageConnect), kv...)
	}
	if m.tlsStart >= 0 {
		if end := s.end(m.tlsDone); end >= 0 {
			kv := []attribute.KeyValue{semconv.ServerAddressKey.String(s.addr), semconv.TLSProtocolNameKey.String("tls")}
			if info := s.tl.TLS; info.Done && info.Err == nil {
				if v, ok := strings.CutPrefix(tls.VersionName(info.Version), "TLS "); ok {
					kv = append(kv, semconv.TLSProtocolVersionKey.String(v))
				}
				kv = append(kv, semconv.TLSResumedKey.Bool(info.Resumed))
			}
			s.span(ctx, spanTLS+" "+s.addr, m.tlsStart, end, vocab.StageTLS, errType(m.tlsErr, vocab.StageTLS), kv...)
		}
	}
}

// errType returns the class of err at stage, "" for no error.
func errType(err error, stage vocab.Stage) string {
	if err == nil {
		return ""
	}
	return string(vocab.Classify(err, stage))
}

// bodySpan exports the transfer of the response body, from its first byte
// to its EOF, or to its close when it was closed before (or never read).
func (o *Observer) bodySpan(ctx context.Context, tl *httptrace.Timeline) {
	if !sampled(ctx) {
		return
	}
	s := o.newStageSpans(tl)
	m := &s.m
	if m.first < 0 {
		return
	}
	end := m.eof
	if end < 0 {
		end = s.end(m.closed)
	}
	if end < 0 {
		return
	}
	kv := []attribute.KeyValue{connIDKey.Int64(int64(tl.Conn.ID))}
	if tl.BodyEOF {
		kv = append(kv, semconv.HTTPResponseBodySizeKey.Int64(tl.BodyBytes))
	}
	if tl.ClosedEarly {
		kv = append(kv, closedEarlyKey.Bool(true))
	}
	s.span(ctx, spanBody, m.first, end, vocab.StageBody, "", kv...)
}
