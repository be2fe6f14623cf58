// Package probe audits a real host's connection reuse: it sends a bounded
// number of requests through a fresh tracked pool ([pool.New]) and reports
// how many connections they took against the ideal, who closed each
// connection and why, the protocol and TLS session resumption, and the
// stage durations on new and reused connections. Optional discovery phases
// measure the server's requests-per-connection limit and its keep-alive
// idle timeout. [Run] returns a [Result] and its findings ([Finding]);
// [Result.WriteText] and [Result.WriteJSON] render it. Nothing here prints
// or exits.
//
// # Bounds
//
// A probe never sends more requests than asked: the main run sends at most
// [Requests] (workers take numbered tickets), redirects are not followed,
// and requests the Transport retried by itself are counted and reported
// ("hidden-retries"), not repeated. Discovery requests run on pools
// of their own, are counted apart ([Discovery.Requests]) and are bounded:
// [FindMaxRequests] by its limit, [FindIdleTimeout] by its longest gap and
// a fixed number of trials. Each request is bounded by [Timeout] (which
// also bounds each dial and TLS handshake), and the whole probe, discovery
// included, by [Deadline]: requests not started by then are not sent.
//
// # Dials and the ideal
//
// Dials are counted at the dialer, never from GotConnInfo.Reused. With
// perfect keep-alive a probe dials once per connection it may use at
// once: min([MaxConnsPerHost], [Concurrency]) ([Concurrency] when there is
// no cap), and once in all over HTTP/2. A server that closes connections
// makes more.
//
// # Findings
//
// Each finding has a stable id and a severity ("info", "warn", "error");
// [Finding] lists them. A connection counts the requests answered on it:
// a request the Transport sent again on another connection counts where
// its response came. The server's closes announced on error responses
// (status ≥ 400) are not taken for keep-alive limits.
//
// # Secrets
//
// Every URL in a report is redacted as [httptrace.Timeline.URL] is (no user
// information, query values masked) and every error as
// [httptrace.Timeline.RedactError] is. Request header values never appear,
// nor in what the report quotes of the server (its Keep-Alive header), in
// which each is masked (a value of 1 or 2 bytes where it follows its name).
//
// # Nil values
//
// Nothing here panics on nil: [Run] refuses a nil context or request with an
// error; a method called on a nil *Result returns an error if it returns one
// ([Result.WriteText], [Result.WriteJSON], also for a nil writer) and zero
// values otherwise.
//
// # Schema
//
// [Result.WriteJSON] writes one object, schema "connaudit.probe/v1"
// ([Result].Schema). Fields are added, never renamed or given another
// meaning within a version. Durations are integer nanoseconds in fields
// ending in _ns.
//
//	schema                   "connaudit.probe/v1"
//	target, method           the redacted URL and the method
//	requested, requests      requests asked for, and sent
//	concurrency, max_conns   workers, and the pool's cap per host (0: none)
//	gap_ns, timeout_ns, deadline_ns, client_idle_timeout_ns
//	elapsed_ns               the whole probe, discovery included
//	main_elapsed_ns          the main run's requests, from the start until the last ended
//	deadline_reached         the deadline stopped the probe
//	cut_by_deadline          main-run requests the deadline ended
//	interrupted              the caller's context ended the probe
//	unreachable              no main-run request got a response (the caller's context aside)
//	duration_ns              the Duration option (absent without it)
//	requests_per_second      requests over main_elapsed_ns
//	outcomes                 {class: count} over the main run ("ok", "connect-refused", …)
//	statuses                 {"200": count} over the responses
//	failures                 [{class, stage, error, count}], up to 10 distinct
//	hidden_retries           requests the Transport retried by itself
//	extra_attempts           their attempts beyond the first
//	hidden_retries_not_processed, hidden_retries_possibly_processed
//	                         the hidden retries judged on the evidence (they add up to hidden_retries)
//	hidden_retries_not_processed_why
//	                         {why: count}: "never-written", "server-closed-first", "stale-idle",
//	                         "h2-goaway-or-refused" (see Result.HiddenRetriesWhy)
//	dials, dial_errors       dials made by the main run, and those that failed
//	dials_abandoned          dials or TLS handshakes the Transport cancelled once no request needed them (nothing failed)
//	perfect_dials            dials with perfect keep-alive
//	requests_per_connection  {min, max, mean} of the requests answered per connection, over every one that
//	                         answered one (listed or not)
//	protocols                {"HTTP/1.1" | "HTTP/1.0" | "h2": connections that carried a request}
//	tls                      {versions {"TLS 1.3": n}, connections, resumed, resumable, alpn}; absent without TLS;
//	                         resumable: connections whose handshake began after another's had finished, or that resumed
//	connections              [{id, proto, tls_version, tls_resumed, requests, responses, closed_by ("client" | "server"),
//	                           close_reason, close_detail, close_status, idle_before_close_ns, dial_error, dial_abandoned,
//	                           dialed_at, first_used_at, closed_at}],
//	                         at most 4096; requests counts the attempts sent on it (a request the Transport sent
//	                         again elsewhere included), responses those answered on it; close_status is the status
//	                         of the response that announced the server's close
//	connections_omitted      connections beyond those listed
//	closed_by                {close_reason: count} over every close
//	stages                   {new: StageSet, reused: StageSet, reuse_saves_ns}: successful requests only;
//	                         StageSet is {count, dns, connect, tls, pool_wait, write, server, transfer, total},
//	                         each {p50_ns, p90_ns, p99_ns, max_ns} (nearest rank, from a histogram: within 1 %;
//	                         max_ns exact); reuse_saves_ns is the median of dns + connect + tls on new
//	                         connections, what reuse saves, absent unless there are requests on both
//	server_keep_alive        {header, responses, timeout_ns, max}: the server's Keep-Alive response header
//	                         (absent when no response had one)
//	discovery                {requests, dials,
//	                          max_requests: {requests, bound, dials, found, limit, how, hidden_retry, error_responses, error},
//	                          idle_timeout: {requests, trials, dials, max_ns, found, survived_ns, closed_ns, complete, error}}
//	                         absent unless a discovery ran; the idle timeout lies in (survived_ns, closed_ns]
//	findings                 [{id, severity ("info" | "warn" | "error"), message}], most severe first
//	timelines                per-request timelines (httptrace.Timeline.MarshalJSON), only with KeepTimelines
//
// Close reasons are those of [pool.CloseReason]: "connection-close" (the
// server's Connection: close), "http1.0-no-keep-alive", "server-closed-idle",
// "server-eof", "server-reset", "goaway", "early-body-close" (the client
// closed a body before its end, as with a body over [MaxBody]),
// "idle-timeout", "close-idle-connections" (the probe closing its idle
// connections at the end), "request-error", "protocol-error" (the client
// gave the connection up over the server's protocol violation), "h2-unused"
// (an HTTP/2 connection dialed beside another and closed unused), and
// others.
//
// # Memory
//
// A run's memory does not grow with its number of requests: stage
// durations go into fixed-size histograms, connections are tallied one by
// one up to a bound and summed up beyond it, and the connections listed
// are bounded. [KeepTimelines] alone keeps every timeline; [OnProgress]
// hands each over as it finishes instead.
//
// # Hidden retries
//
// A request the Transport sent again by itself is judged on the evidence
// of its first attempt ([Result].HiddenRetriesWhy): not processed when no
// byte of it was written, when the server's close of the HTTP/1
// connection came before it was written, when it was written to an HTTP/1
// connection idle for the server's idle timeout (the smallest of what the
// server advertises, what discovery found and what the run saw) that the
// server closed without a response byte, or when its HTTP/2 stream was
// above a GOAWAY's last stream id or refused (the Transport sends a written
// stream again for those alone, and for a reset with PROTOCOL_ERROR, which
// counts as possibly processed). The others were written to a live
// connection that then failed: possibly processed, which the
// "hidden-retries" finding reports.
package probe
