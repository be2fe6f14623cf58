// Package proxy audits any client against its real upstream: a reverse
// proxy the client under test is pointed at, which accounts for every
// downstream connection from accept to close (its requests, idle gaps,
// who closed it and why), the upstream pool's connections (tracked by
// package pool), the requests a client sends again, and faults its rules
// inject, keyed to a connection's request index, its idle time and a
// share of the traffic.
//
// Bodies stream both ways; nothing is buffered whole. A fault touches only
// the requests and connections a rule matches. The verdicts use the
// audit's words: write-committed-twice, hidden-retry, unbounded,
// server-idle-timeout.
//
// docs/proxy.md describes the rules' format and the report.
package proxy
