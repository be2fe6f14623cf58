package httptrace

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// NewSlogObserver returns an observer that logs one record per finished
// request through logger, at level when it succeeded (any HTTP status) and
// at errorLevel when it failed, with the stage timings as attributes. The
// record's message is "http request" and its keys, which stay stable: id,
// method, url (redacted), outcome (the class), stage, status, proto, conn
// (the connection's id), new_conn, idle_for, pool_wait, dns, connect, tls,
// write, server, transfer, total (durations, as the handler writes
// slog.Duration: nanoseconds in JSON) and body_bytes; and, when they apply,
// attempt, transport_retries, closed_early and error (redacted).
//
// It also logs, at slog.LevelWarn, each response body still open past
// [UnclosedBodyWarning] ("response body not closed") and each body garbage
// collected without Close ("response body garbage collected without
// Close"), with the keys id, method, url, conn, open_for, body_bytes and,
// with [CaptureStacks], opened_at: where the request was made; without,
// fix says how to record it. Each warning is logged once per place: per
// call site with CaptureStacks, per method and host without, naming the
// first body left open there; a leak in a loop does not flood the log.
//
// Over a pool (package pool's WithObserver), it logs the pool's warning
// that it closes connections to a host for a full idle pool at a high
// rate ("idle-pool-churn": "connections closed for a full idle pool:
// raise MaxIdleConnsPerHost"), once, with the keys host, closes,
// requests (the closes came within that many requests to the host),
// per_second, setting (MaxIdleConnsPerHost, or MaxIdleConns), limit (its
// value), in_flight (the most requests in flight at once, each needing a
// connection) and fix. A nil logger is an error.
func NewSlogObserver(logger *slog.Logger, level, errorLevel slog.Level) (EventObserver, error) {
	if logger == nil {
		return nil, errors.New("httptrace: NewSlogObserver: nil logger")
	}
	return &slogObserver{logger: logger, level: level, errorLevel: errorLevel, warned: map[string]bool{}}, nil
}

type slogObserver struct {
	logger     *slog.Logger
	level      slog.Level
	errorLevel slog.Level

	mu     sync.Mutex
	warned map[string]bool // the places already warned about, by kind
}

// maxWarned bounds the places a slogObserver remembers; past it, every
// warning is logged.
const maxWarned = 1024

// firstWarning reports whether a warning of kind for a request made at
// place was not logged yet, and remembers it.
func (s *slogObserver) firstWarning(kind Kind, place string) bool {
	key := string(kind) + " " + place
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warned[key] {
		return false
	}
	if len(s.warned) < maxWarned {
		s.warned[key] = true
	}
	return true
}

// fixNoStack is the fix of an unclosed-body warning without the place
// where the request was made.
const fixNoStack = "record where each request is made with pool.CaptureStacks() " +
	"(CaptureStacks() on a bare tracer), at the cost of a stack walk per request"

// slogKinds are the kinds of events a slogObserver logs.
var slogKinds = vocab.Of(vocab.KindBodyHeld, vocab.KindBodyCollected, vocab.KindIdlePoolChurn)

// EventKinds implements hook.Filter: the tracer calls ObserveEvent for the
// warnings alone.
func (s *slogObserver) EventKinds() vocab.KindSet { return slogKinds }

// ObserveEvent logs the warning of a body left open or collected
// unclosed, and a pool's warning of churn.
func (s *slogObserver) ObserveEvent(tl *Timeline, ev Event) {
	if tl == nil {
		return
	}
	if ev.Kind == vocab.KindIdlePoolChurn {
		s.churn(ev)
		return
	}
	var msg string
	switch ev.Kind {
	case vocab.KindBodyHeld:
		msg = "response body not closed"
	case vocab.KindBodyCollected:
		msg = "response body garbage collected without Close"
	default:
		return
	}
	ctx := context.Background()
	if !s.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	stack := tl.Stack()
	// The place is the innermost frame of the caller: its function and
	// file:line, the stack's first two lines.
	place := stack
	if i := strings.Index(stack, "\n\t"); i >= 0 {
		if j := strings.IndexByte(stack[i+2:], '\n'); j >= 0 {
			place = stack[:i+2+j]
		}
	}
	if place == "" {
		place = tl.Method + " " + tl.Host
	}
	if !s.firstWarning(ev.Kind, place) {
		return
	}
	openFor := ev.At
	if resp, ok := tl.First(vocab.KindResponse); ok {
		openFor -= resp.At
	}
	attrs := []slog.Attr{
		slog.Uint64("id", tl.ID),
		slog.String("method", tl.Method),
		slog.String("url", tl.URL()),
		slog.Uint64("conn", tl.Conn.ID),
		slog.Duration("open_for", openFor),
		slog.Int64("body_bytes", tl.BodyBytes),
	}
	if stack != "" {
		attrs = append(attrs, slog.String("opened_at", stack))
	} else {
		attrs = append(attrs, slog.String("fix", fixNoStack))
	}
	s.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// churn logs a pool's warning of connections closed for a full idle pool
// at a high rate, once per host.
func (s *slogObserver) churn(ev Event) {
	var w *hook.Churn
	ctx := context.Background()
	if !errors.As(ev.Err, &w) || !s.logger.Enabled(ctx, slog.LevelWarn) || !s.firstWarning(ev.Kind, w.Host) {
		return
	}
	s.logger.LogAttrs(ctx, slog.LevelWarn, "connections closed for a full idle pool: raise "+w.Setting,
		slog.String("host", w.Host),
		slog.Int("closes", w.Closes),
		slog.Int("requests", w.Requests),
		slog.Float64("per_second", w.PerSecond()),
		slog.String("setting", w.Setting),
		slog.Int("limit", w.Limit),
		slog.Int("in_flight", w.InFlight),
		slog.String("fix", w.Fix),
	)
}

// Observe logs tl.
func (s *slogObserver) Observe(tl *Timeline) {
	if tl == nil {
		return
	}
	level := s.level
	if tl.Outcome.Class != vocab.ClassOK {
		level = s.errorLevel
	}
	ctx := context.Background()
	if !s.logger.Enabled(ctx, level) {
		return
	}
	t := tl.Timings()
	attrs := []slog.Attr{
		slog.Uint64("id", tl.ID),
		slog.String("method", tl.Method),
		slog.String("url", tl.URL()),
		slog.String("outcome", string(tl.Outcome.Class)),
		slog.String("stage", string(tl.Outcome.Stage)),
		slog.Int("status", tl.Status),
		slog.String("proto", tl.Proto),
		slog.Uint64("conn", tl.Conn.ID),
		slog.Bool("new_conn", t.NewConn),
		slog.Duration("idle_for", t.IdleFor),
		slog.Duration("pool_wait", t.PoolWait),
		slog.Duration("dns", t.DNS),
		slog.Duration("connect", t.Connect),
		slog.Duration("tls", t.TLS),
		slog.Duration("write", t.Write),
		slog.Duration("server", t.Server),
		slog.Duration("transfer", t.Transfer),
		slog.Duration("total", t.Total),
		slog.Int64("body_bytes", tl.BodyBytes),
	}
	if tl.Attempt > 0 {
		attrs = append(attrs, slog.Int("attempt", tl.Attempt))
	}
	if tl.Retries > 0 {
		attrs = append(attrs, slog.Int("transport_retries", tl.Retries))
	}
	if tl.ClosedEarly {
		attrs = append(attrs, slog.Bool("closed_early", true))
	}
	if tl.Outcome.Err != nil {
		attrs = append(attrs, slog.String("error", tl.RedactError(tl.Outcome.Err)))
	}
	s.logger.LogAttrs(ctx, level, "http request", attrs...)
}
