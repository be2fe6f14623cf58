// Package audit drives real faults at a single-connection HTTP client pool
// and proves that the pool survives them.
//
// The [Catalogue] holds named [Scenario]s — timeouts, premature closes,
// resets, cancellations, unclosed bodies, hidden transport retries and the
// retry contracts — over HTTP/1.1 and HTTP/2. The retry contracts judge
// package retry, or the caller's own retry layer ([WithRetry]), each named
// by its id ([Scenario].Contract). A [Runner] runs each
// against the loopback fault server of package faultserver and a
// [pool.Pool] with MaxConnsPerHost=1 (or a transport the caller supplies,
// to audit the configuration it ships). For each scenario it compares the
// expected outcome class and stage, client attempts, server-seen requests,
// dials, connection fate and, where the fault fixes it, the number of body
// bytes the client received with what happened, and then checks recovery:
// the same pool serves /ok, no connection is active, no body is open and no
// goroutine leaked.
//
// A client with no bound on the faulted stage does not hang the run: a guard
// deadline ends the request and the scenario fails as "unbounded: no
// timeout fired at stage X". A server that saw more requests than the
// client made attempts is reported as a hidden transport retry.
//
// Reports are text ([WriteText]), JSON ([Report] marshals to a stable form)
// and JUnit XML ([WriteJUnit]). Each lists every scenario given to
// [Runner.Run]: one not started because the run's context ended is
// reported skipped (JSON: the result's "skipped" reason and the report's
// "skipped" count; JUnit: a <skipped> element and the suite's skipped
// attribute), and the report is not OK. Scenarios run one at a time: the
// goroutine check compares the whole process with its state before each
// scenario.
package audit
