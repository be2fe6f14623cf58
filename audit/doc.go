// Package audit drives real faults at a single-connection HTTP client pool
// and proves that the pool survives them.
//
// The [Catalogue] holds named [Scenario]s — timeouts, premature closes,
// resets, cancellations, unclosed bodies, hidden transport retries and the
// retry contracts — over HTTP/1.1 and HTTP/2; [Select] picks some by name
// and protocol. The retry contracts judge package retry, or the caller's
// own retry layer ([WithRetry]), each named by its id
// ([Scenario].Contract). A [Runner] runs each against the loopback fault
// server of package faultserver and a [pool.Pool] with MaxConnsPerHost=1:
// the reference pool, whose bounds are the catalogue's reference bounds
// ([Scenario.Bound]), or a transport the caller supplies ([WithTransport]),
// to audit the configuration it ships. For each scenario it compares the
// expected outcome class and stage, client attempts, server-seen requests,
// dials, connection fate and, where the fault fixes it, the number of body
// bytes the client received with what happened, and then checks recovery:
// the same pool serves /ok, no connection is active, no body is open and no
// goroutine leaked. A scenario gives one verdict: the runner waits, bounded,
// for what the Transport does after the caller has its outcome (a
// connection it closes once its read loop has failed the request), rather
// than reading a race.
//
// A client with no bound on the faulted stage does not hang the run, and
// no bound of the client's is judged by racing it ([GuardDeadline]): a
// bound the runner sees is waited for, and half again; one it cannot see
// (a dial function of the transport's own, the caller's retry layer) up
// to the guard deadline, 10s by default. A stage still in progress then
// fails as "unbounded: no timeout fired at stage X" (a retry layer's call
// of several attempts: "the call had not ended …", with the attempts it
// started after its context ended); a bound it sees that is longer than
// the deadline fails as "beyond the guard". Every failure says what fixes
// it ([Result.Fix]): the http.Transport setting that bounds the stage, the
// one that explains the connection's fate, or what the retry layer must
// do, down to the policy field it does not apply. A server that saw more
// requests than the client made attempts is reported as a hidden transport
// retry.
//
// Retry layers are audited as they are written: an http.RoundTripper
// ([WithRetryTransport]) or a function ([WithRetry]). Package audittest
// runs the catalogue as go test subtests, one per scenario. Outcomes are
// compared with the vocabulary's constants: httptrace.ClassReset,
// httptrace.StageConnect, pool.ReasonServerEOF, [FateReused].
//
// [Protocols] says which protocols the client is meant to speak. The
// scenarios of a protocol not meant, or one the transport cannot speak,
// are skipped with the reason; a protocol meant that the transport cannot
// speak is a finding ([Report.Findings]) that names why and the fix.
//
// Reports are text ([Report.WriteText]: a row per scenario within 100
// columns, a failure's reasons and fix under its row), JSON ([Report]
// marshals to a stable form) and JUnit XML ([Report.WriteJUnit]). Each
// lists every scenario given to [Runner.Run]: one not started because the
// run's context ended is reported skipped (JSON: the result's "skipped"
// reason and the report's "skipped" count; JUnit: a <skipped> element and
// the suite's skipped attribute), and the report is incomplete and not OK.
// Scenarios run 8 at once unless [Parallel] says otherwise (1: one at a
// time, in their order), and the caller's retry layer's contracts one at a
// time unless Parallel is given: each scenario's goroutines carry a pprof
// label of their own, so that its leak check counts its own, whatever runs
// beside.
package audit
