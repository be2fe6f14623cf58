package serve

import (
	"fmt"
	"slices"
	"strings"
)

// term names what a fix is about: a bound of the policy, a retry rule, or
// something the client does with its connections. A kit declares, for each
// term it knows, what fixes it in its client's own terms (its option, flag
// or class: client.terms, docs/serve.md); a term it does not declare is
// said in the policy's own terms (generic).
type term string

// The terms a kit may declare, as client.terms names them.
const (
	// The bounds, each named after the policy's field: what bounds a call
	// that no bound of the client's ended.
	tReadTimeout        term = "read_timeout"
	tAttemptTimeout     term = "attempt_timeout"
	tConnectTimeout     term = "connect_timeout"
	tTLSTimeout         term = "tls_timeout"
	tTotalTimeout       term = "total_timeout"
	tPoolAcquireTimeout term = "pool_acquire_timeout"
	// The retry rules: retry_statuses (a status outside them was retried),
	// retry_errors (an error or timeout was), retries (a status of
	// retry_statuses was not retried, or not as often), max_retries (more
	// retries than it), retry_budget (retries past total_timeout_ms),
	// retry_methods (a POST replayed against its rule), idempotency_key
	// (the key not kept across attempts), last_status (the last response
	// not handed back when the retries ran out).
	tRetryStatuses  term = "retry_statuses"
	tRetryErrors    term = "retry_errors"
	tRetries        term = "retries"
	tMaxRetries     term = "max_retries"
	tRetryBudget    term = "retry_budget"
	tRetryMethods   term = "retry_methods"
	tIdempotencyKey term = "idempotency_key"
	tLastStatus     term = "last_status"
	// What the client does with its connections: cancel (the server did
	// not see a cancelled call go), hidden_retry (the client sent a
	// request again by itself), recovery (/ok failed), fate (the faulted
	// connection's fate), stale (a connection the server had closed was
	// used), idle_timeout (idle connections kept as long as the servers
	// keep them, or longer), health_check (a connection gone dark over
	// HTTP/2 kept taking requests), open_at_done (connections open after
	// done).
	tCancel      term = "cancel"
	tHiddenRetry term = "hidden_retry"
	tRecovery    term = "recovery"
	tFate        term = "fate"
	tStale       term = "stale"
	tIdleTimeout term = "idle_timeout"
	tHealthCheck term = "health_check"
	tOpenAtDone  term = "open_at_done"
)

// generic says each fix in the policy's own terms, for a term the kit does
// not declare. health_check has none: the scenario's own fix says it.
var generic = map[term]string{
	tReadTimeout:        "apply read_timeout_ms: a read interval for the headers and between body reads",
	tAttemptTimeout:     "apply attempt_timeout_ms to each attempt, body included",
	tConnectTimeout:     "apply connect_timeout_ms",
	tTLSTimeout:         "apply tls_timeout_ms to the TLS handshake",
	tTotalTimeout:       "apply total_timeout_ms to all attempts and delays",
	tPoolAcquireTimeout: "a pool of pool_max_per_host connections whose callers wait at most pool_acquire_timeout_ms",
	tRetryStatuses:      "retry only the statuses of retry_statuses",
	tRetryErrors:        "retry errors only when retry_errors is true",
	tRetries:            "retry the statuses of retry_statuses, max_retries times",
	tMaxRetries:         "at most max_retries retries",
	tRetryBudget:        "end the call when total_timeout_ms is spent, in a delay too",
	tRetryMethods:       "replay a POST only as retry_any_method or retry_with_idempotency_key allow",
	tIdempotencyKey:     "keep the Idempotency-Key across attempts",
	tLastStatus:         "hand back the last response when retries run out",
	tCancel:             "close the connection when the call is cancelled or times out",
	tHiddenRetry:        "say which requests the client replays by itself",
	tRecovery:           "send /ok through the same client",
	tFate:               "see the connection's fate",
	tStale: "check a pooled connection before reusing it, or close idle connections before the server does " +
		"(an idle timeout below the server's keep-alive timeout)",
	tIdleTimeout: "close idle connections before the servers do: an idle timeout below their keep-alive timeout " +
		"(connaudit serve -server-idle-timeout states it; connaudit probe -find-idle-timeout measures it)",
	tHealthCheck: "",
	tOpenAtDone:  "close the client (its pool) when done",
}

// maxTerm is the longest text a kit may declare for a term, in bytes.
const maxTerm = 1000

// termsOf validates a kit's declaration: every key a term of generic's,
// every text not empty, at most maxTerm bytes and printable as given; it
// returns the texts as the reports show them (redacted), or says what is
// wrong with the first key, in sorted order, that is.
func termsOf(decl map[string]string) (map[term]string, error) {
	if len(decl) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(decl))
	for k := range decl {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[term]string, len(decl))
	for _, k := range keys {
		v := decl[k]
		if _, ok := generic[term(k)]; !ok {
			return nil, badRequest("client.terms: %q is not a term (the terms: %s)", printable(cut(k, 64)), termNames())
		}
		switch {
		case strings.TrimSpace(v) == "":
			return nil, badRequest("client.terms.%s is empty: leave a term out to have it said in the policy's terms", k)
		case len(v) > maxTerm:
			return nil, badRequest("client.terms.%s is %d bytes, longer than %d", k, len(v), maxTerm)
		}
		out[term(k)] = printable(v)
	}
	return out, nil
}

// termNames lists the terms a kit may declare, sorted.
func termNames() string {
	names := make([]string, 0, len(generic))
	for t := range generic {
		names = append(names, string(t))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// cut shortens s to at most n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// say is the fix for t: the kit's text where it declared one, else the
// policy's own terms.
func say(terms map[term]string, t term) string {
	if s, ok := terms[t]; ok {
		return s
	}
	return generic[t]
}

// boundOf is the policy setting a scenario's unbounded call lacked.
func boundOf(sp *spec) term {
	p := sp.policy
	switch {
	case p.PoolAcquireTimeoutMS > 0:
		return tPoolAcquireTimeout
	case p.TLSTimeoutMS > 0:
		return tTLSTimeout
	case p.ConnectTimeoutMS > 0:
		return tConnectTimeout
	case p.ReadTimeoutMS > 0:
		return tReadTimeout
	case sp.Expect.BudgetEnds:
		return tTotalTimeout
	}
	return tAttemptTimeout
}

// termOf is the term that fixes each kind of failure; failUnbounded and
// failOutcome take the scenario's bound instead (boundOf).
var termOf = map[failure]term{
	failRetriedStatus: tRetryStatuses,
	failRetriedError:  tRetryErrors,
	failNotRetried:    tRetries,
	failTooMany:       tMaxRetries,
	failBudget:        tRetryBudget,
	failPost:          tRetryMethods,
	failKey:           tIdempotencyKey,
	failLastStatus:    tLastStatus,
	failCancel:        tCancel,
	failHidden:        tHiddenRetry,
	failRecovery:      tRecovery,
	failPool:          tPoolAcquireTimeout,
	failFate:          tFate,
	failStale:         tStale,
	failIdle:          tIdleTimeout,
}

// fixFor says what fixes fails in the terms the kit declared.
func fixFor(terms map[term]string, sp *spec, fails []failure) string {
	var out []string
	add := func(t term) {
		if s := say(terms, t); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, x := range fails {
		switch x {
		case failUnbounded:
			add(boundOf(sp))
		case failOutcome:
			if sp.caller.Error == KindTimeout || sp.caller.Error == KindPool {
				add(boundOf(sp))
			}
		default:
			if t, ok := termOf[x]; ok {
				add(t)
			}
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("see the mismatches: the client's %s", sp.Name)
	}
	return strings.Join(out, "; ")
}

// healthFix says what checks an HTTP/2 connection's health, in the
// client's own terms where the kit declared them, else the scenario's fix.
func healthFix(terms map[term]string, sp *spec) string {
	if s := terms[tHealthCheck]; s != "" {
		return s
	}
	return sp.Fix
}
