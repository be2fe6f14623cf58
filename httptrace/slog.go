package httptrace

import (
	"context"
	"log/slog"
)

// SlogObserver is an [Observer] that logs one record per finished request
// through a [log/slog.Logger], with the stage timings as attributes. The
// record's message is "http request" and its keys, which stay stable: id,
// method, url (redacted), outcome (the class), stage, status, proto, conn
// (the connection's id), new_conn, idle_for, pool_wait, dns, connect, tls,
// write, server, transfer, total (durations, as the handler writes
// slog.Duration: nanoseconds in JSON) and body_bytes; and, when they
// apply, attempt, transport_retries, closed_early and error (redacted).
type SlogObserver struct {
	logger     *slog.Logger
	level      slog.Level
	errorLevel slog.Level
}

// NewSlogObserver returns an observer that logs successful requests at level
// and failed ones at errorLevel.
func NewSlogObserver(logger *slog.Logger, level, errorLevel slog.Level) *SlogObserver {
	return &SlogObserver{logger: logger, level: level, errorLevel: errorLevel}
}

// Observe logs tl.
func (s *SlogObserver) Observe(tl *Timeline) {
	level := s.level
	if tl.Outcome.Class != ClassOK {
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
