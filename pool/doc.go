// Package pool is the connection pool under audit: an [http.Transport]
// whose every connection is tracked from dial to close, with pool
// statistics in the spirit of [database/sql.DBStats], a registry of response
// bodies not yet closed, and leak checks.
//
// [New] builds a service's pool: a fresh transport with
// http.DefaultTransport's settings. [Track] clones a caller's own transport
// (never changing it), so that the configuration a team ships is what is
// tracked and audited. The options set what a transport holds
// (MaxConnsPerHost, ResponseHeaderTimeout…, named as http.Transport names
// them) and what it cannot: the body idle bound, the unclosed-body warning,
// where each request was made. The audit's reference pool is New with
// MaxConnsPerHost(1) and MaxIdleConnsPerHost(1). Either way the
// [Pool.Client] sends requests through an [httptrace.Transport], and the
// pool learns each connection's state from the same timeline events the
// tracer records: GotConn makes a connection active, PutIdleConn makes it
// idle, and the tracked connection's Close ends it, with who closed it and
// why.
//
// Connections are counted by dials, never by GotConnInfo.Reused, which
// over-reports. The invariants dials = open + closed + dial errors +
// dialing and active + idle = open hold at every instant ([Stats.Check]).
//
// [Pool.Check] waits for the pool to settle and returns one error naming
// every problem: bodies still open and where they were opened, connections
// still active and the request holding each, more connections than the cap.
// In a test, package pooltest's VerifyNone runs it together with goleak and
// names leaked net/http goroutines by their cause; it lives apart so that a
// service importing pool links neither package testing nor goleak.
//
// [Pool.Handler] serves the pool's [Snapshot] on a debug route;
// [Pool.Publish] publishes it through expvar.
//
// # The churn trap
//
// An idle pool smaller than the requests a host gets at once closes
// connections as their requests end (close reason "idle-pool-full") and
// dials again for the next ones: New keeps http.DefaultTransport's 2 idle
// connections per host, which four workers already outgrow. When ten
// connections to a host are closed for a full idle pool within fewer than
// 500 requests to it (two requests in a hundred paying a dial a larger
// idle pool would have saved), the pool says so once, to the observers
// given with [WithObserver], as an "idle-pool-churn" event
// ([httptrace.KindIdlePoolChurn]) on the timeline of the next request it
// sees; [httptrace.NewSlogObserver] logs it as a warning naming the cap
// (MaxIdleConnsPerHost, or MaxIdleConns), its value, the closes, their
// rate and the fix: [MaxIdleConnsPerHost] at the most requests in flight
// to the host at once. Counting costs two integer operations per request
// (the pool's request count is the clock) and a few per such close.
//
// # Nil and closed pools
//
// Nothing here panics on nil. A method called on a nil *Pool returns an
// error if it returns one ([Pool.Check], [Pool.Quiesce], [Pool.WaitFor],
// [Pool.Publish]); [Pool.Client] and [Pool.RoundTripper] return ones that
// fail every request so, [Pool.Handler] one that answers 500; the others
// return zero values or do nothing ([Pool.Close]). A nil context, condition
// or option is an error too. After [Pool.Close] the pool refuses the
// requests sent through it with [ErrClosed], which errors.Is finds; the
// rest (statistics, connections, checks, the page) still tells what it did.
package pool
