// Package connaudit audits the lifecycle of HTTP client connection pools.
//
// It traces every stage of every request — pool acquire, DNS, connect, TLS,
// request written, first byte, body EOF, body close, return to the pool —
// tracks every connection from dial to close with who closed it and why,
// drives real faults at a MaxConnsPerHost=1 pool (timeouts, premature
// closes, resets, cancellations) and proves that the pool still serves /ok
// with no goroutine, connection or response body leaked.
//
// The module is organised as:
//
//   - [github.com/connaudit/connaudit/httptrace]: the per-request stage
//     timeline, a RoundTripper wrapper, outcome classes and observers
//     (log/slog, JSON Lines, an in-memory collector).
//   - [github.com/connaudit/connaudit/pool]: the pool under audit —
//     connection tracking, statistics in the spirit of sql.DBStats, open
//     response bodies and leak checks.
//   - [github.com/connaudit/connaudit/retry]: a bounded retry policy with
//     per-attempt and total budgets.
//   - [github.com/connaudit/connaudit/audit]: the fault catalogue, its
//     runner and reports; [github.com/connaudit/connaudit/faultserver]
//     is the loopback fault server it drives.
//   - cmd/connaudit: the command line.
//
// This package holds documentation only.
package connaudit
