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
//     response bodies, leak checks and a debug page;
//     [github.com/connaudit/connaudit/pool/pooltest] ends a test with
//     VerifyNone (no open body, active connection or leaked goroutine).
//   - [github.com/connaudit/connaudit/retry]: a bounded retry policy with
//     per-attempt and total budgets.
//   - [github.com/connaudit/connaudit/faultserver]: the loopback fault
//     server (HTTP/1.1, HTTPS, HTTP/2, raw frames, hung dials and
//     handshakes) and its counters.
//   - [github.com/connaudit/connaudit/audit]: the fault catalogue and the
//     retry contracts, their runner and reports;
//     [github.com/connaudit/connaudit/audit/audittest] runs them as go test
//     subtests.
//   - [github.com/connaudit/connaudit/probe]: a real host's connection
//     reuse: dials against the ideal, who closed each connection and why,
//     the server's keep-alive limits, findings.
//   - [github.com/connaudit/connaudit/proxy]: a reverse proxy that audits
//     any client against its real upstream: both ends' connections,
//     replays, and faults keyed to connections.
//   - [github.com/connaudit/connaudit/serve]: the catalogue as a server
//     for clients of any language, which the kits under kits/ (curl,
//     Python, Node, Java) speak to.
//   - cmd/connaudit: the command line (scenarios, trace, probe, serve, proxy).
//
// Side modules, each with a go.mod of its own so that this one depends on
// goleak, testify and golang.org/x/net alone: otelconnaudit (OpenTelemetry
// metrics and stage spans) and promconnaudit (a Prometheus collector, its
// rules and a dashboard), the exporters; bench (peers and benchmarks),
// compat (real retry libraries judged on the retry contracts) and examples
// (runnable services). docs/design.md has the whole picture.
//
// This package holds documentation only.
package connaudit
