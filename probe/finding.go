package probe

import (
	"fmt"
	"slices"
)

// Severity ranks a [Finding].
type Severity string

// The severities, least severe first.
const (
	SeverityInfo  Severity = "info"  // worth knowing; nothing to fix
	SeverityWarn  Severity = "warn"  // costs latency or risks stale-connection failures
	SeverityError Severity = "error" // requests failed, or a requirement is not met
)

// Rank orders severities: info 1, warn 2, error 3; anything else 0.
func (s Severity) Rank() int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarn:
		return 2
	case SeverityError:
		return 3
	}
	return 0
}

// ParseSeverity returns the severity named s ("info", "warn" or "error").
func ParseSeverity(s string) (Severity, error) {
	switch Severity(s) {
	case SeverityInfo, SeverityWarn, SeverityError:
		return Severity(s), nil
	}
	return "", fmt.Errorf("unknown severity %q: want info, warn or error", s)
}

// The finding ids. They are stable: scripts may match on them.
const (
	// FindingRequestErrors: some requests failed (the deadline's cuts
	// aside). Error.
	FindingRequestErrors = "request-errors"
	// FindingNoKeepAlive: the server closed every connection after one
	// response (Connection: close, HTTP/1.0 without keep-alive, or a close
	// without notice). Warn.
	FindingNoKeepAlive = "no-keep-alive"
	// FindingServerClosesEveryN: the server closes each connection after N
	// requests (N ≥ 2). Warn below 100 requests, info from 100 on.
	FindingServerClosesEveryN = "server-closes-every-n"
	// FindingServerIdleShorterThanClient: the server closes idle
	// connections sooner than the client gives them up, so the client may
	// pick a connection the server is closing: a failed request or a
	// hidden retry. Warn.
	FindingServerIdleShorterThanClient = "server-idle-shorter-than-client"
	// FindingH2NotOffered: over TLS, the server did not select HTTP/2.
	// Info; error with [RequireHTTP2].
	FindingH2NotOffered = "h2-not-offered"
	// FindingHiddenRetries: the Transport retried requests by itself:
	// a timeline asked for a connection again after it had one (see
	// [Report.HiddenRetries]). It sent them again on another connection
	// after the first failed before any response; the server may or may
	// not have processed the first attempt, so a request that is not
	// idempotent risks running twice. Warn.
	FindingHiddenRetries = "hidden-retries"
	// FindingSlowNewConnection: setting up a connection (DNS, connect,
	// TLS) took more than half the per-request timeout, or a request on a
	// new connection ran out of it. Warn.
	FindingSlowNewConnection = "slow-new-connection"
	// FindingTLSNotResumed: no TLS connection resumed an earlier session
	// although some could have, so each pays a full handshake. Info.
	FindingTLSNotResumed = "tls-not-resumed"
	// FindingDeadlineReached: the deadline stopped the probe; its numbers
	// cover part of the run. Warn.
	FindingDeadlineReached = "deadline-reached"
	// FindingErrorResponses: every response was an error (status 400 or
	// more). The closes the server announced on error responses are not
	// taken for keep-alive limits. Warn.
	FindingErrorResponses = "error-responses"
)

// Finding is one conclusion of a probe.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// Worst returns the highest severity among r's findings, "" if none.
func (r *Report) Worst() Severity {
	var w Severity
	for _, f := range r.Findings {
		if f.Severity.Rank() > w.Rank() {
			w = f.Severity
		}
	}
	return w
}

// Fails reports whether r has a finding at or above level.
func (r *Report) Fails(level Severity) bool {
	return level.Rank() > 0 && r.Worst().Rank() >= level.Rank()
}

// Has returns the finding with the given id, if r has it.
func (r *Report) Has(id string) (Finding, bool) {
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
