package probe

import "slices"

// Finding is one conclusion of a probe. Its ID is stable, so scripts may
// match on it; the ids, in the order they are drawn, with their severity:
//
//	request-errors                   error  some requests failed (the deadline's cuts aside); a body that
//	                                        did not end within the probe's bounds (went on past MaxBody,
//	                                        or past the Timeout) or ended before its declared length is
//	                                        a failure, said apart with what fixes it
//	protocol-errors                  error  the client gave connections up over the server's protocol
//	                                        violations (an HTTP/2 connection error, bytes sent when no
//	                                        response was due, a body to HEAD), while requests got
//	                                        responses
//	error-responses                  warn   every response was an error (status 400 or more); the
//	                                        server's closes announced on them are not taken for
//	                                        keep-alive limits
//	no-keep-alive                    warn   the server closed every connection after one response
//	                                        (Connection: close, HTTP/1.0 without keep-alive, a close
//	                                        without notice, or a close at once while idle)
//	server-closes-every-n            warn   the server closes each connection after N ≥ 2 requests
//	                                        (info from N = 100)
//	server-idle-shorter-than-client  warn   the server closes idle connections sooner than the
//	                                        client gives them up (IdleConnTimeout), as discovery or
//	                                        the run saw or as its Keep-Alive header says: the client
//	                                        may pick one the server is closing, and the request fails
//	                                        or is retried; the advice takes the smaller of what it
//	                                        says and what it does
//	h2-not-offered                   info   over TLS, the server did not select HTTP/2 (error when
//	                                        Protocols requires HTTP/2)
//	hidden-retries                   warn   the Transport sent requests again on another connection
//	                                        by itself after writing them to a live connection that
//	                                        then failed (Result.HiddenRetriesPossiblyProcessed): the
//	                                        server may have processed them twice (error when the
//	                                        method is not idempotent); retries the evidence shows
//	                                        were not processed are no finding
//	h2-unused-dials                  warn   the Transport dialed HTTP/2 connections it never used:
//	                                        closed once their handshake finished (close reason
//	                                        "h2-unused") or abandoned during it; their cost and the fix
//	keep-alive-header-differs        warn   the server's Keep-Alive header promises more than it
//	                                        keeps: it closes idle connections sooner than its
//	                                        timeout, or connections after fewer requests than its max
//	slow-new-connection              warn   setting up a connection (DNS, connect, TLS) took more
//	                                        than half the per-request timeout, or a request on a new
//	                                        connection ran out of it
//	tls-not-resumed                  info   no TLS connection resumed an earlier session although
//	                                        some could have: each pays a full handshake
//	deadline-reached                 warn   the deadline stopped the probe; its numbers cover part
//	                                        of the run
//
// Each id appears at most once in a report. Compare with a literal:
// rep.Has("no-keep-alive").
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// Severity ranks a [Finding]. The severities, least severe first:
//
//	info   worth knowing; nothing to fix
//	warn   costs latency or risks stale-connection failures
//	error  requests failed, or a requirement is not met
//
// Compare with a literal: f.Severity == "warn".
type Severity string

// The severities, for the package's own code.
const (
	severityInfo  Severity = "info"
	severityWarn  Severity = "warn"
	severityError Severity = "error"
)

// Rank orders severities: info 1, warn 2, error 3; anything else 0.
func (s Severity) Rank() int {
	switch s {
	case severityInfo:
		return 1
	case severityWarn:
		return 2
	case severityError:
		return 3
	}
	return 0
}

// Worst returns the highest severity among r's findings, "" if none.
func (r *Result) Worst() Severity {
	var w Severity
	if r == nil {
		return w
	}
	for _, f := range r.Findings {
		if f.Severity.Rank() > w.Rank() {
			w = f.Severity
		}
	}
	return w
}

// Fails reports whether r has a finding at or above level ("info", "warn"
// or "error"; any other level fails nothing).
func (r *Result) Fails(level Severity) bool {
	return level.Rank() > 0 && r.Worst().Rank() >= level.Rank()
}

// Has returns the finding with the given id, if r has it.
func (r *Result) Has(id string) (Finding, bool) {
	if r == nil {
		return Finding{}, false
	}
	for _, f := range r.Findings {
		if f.ID == id {
			return f, true
		}
	}
	return Finding{}, false
}

func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int { return b.Severity.Rank() - a.Severity.Rank() })
}
