// Package httptrace records what happens to each HTTP request as a
// [Timeline]: ordered events with monotonic offsets from the request's start,
// covering every stage — pool acquire, DNS, connect, TLS, request written,
// first response byte, response, body EOF, body close and the return of the
// connection to the pool — and one final [Outcome].
//
// [Transport] is an [net/http.RoundTripper] wrapper that attaches a
// [net/http/httptrace.ClientTrace] to each request (composed with any trace
// the caller already put in the context, so the caller's hooks fire exactly
// once), wraps the response body to see reads, EOF and Close, and hands the
// finished timeline to an [Observer]: a [log/slog] logger ([NewSlogObserver]),
// a JSON Lines writer ([NewJSONLines]) or an in-memory [Collector]. [Trace]
// traces one request in a line.
//
// A response body left open is the leak net/http makes easiest: it pins its
// connection and two goroutines until the request's context ends. A body
// still open a minute after its response ([UnclosedBodyWarning]) is reported
// to the observers, and logged as a warning; with [CaptureStacks], so is a
// body garbage collected without Close, each named with where the request
// was made.
//
// The vocabulary — event [Kind]s, outcome [Class]es and [Stage]s — is
// made of strings whose values each type's documentation lists.
//
// # Concurrency
//
// net/http calls trace hooks from several goroutines (the caller's, the
// dialer's, the connection's read and write loops), sometimes concurrently
// and sometimes after RoundTrip returned: a dial started for a request that
// was cancelled goes on in the background. Each request has its own
// recorder guarded by its own mutex; events that arrive after the timeline
// was handed to the observer are recorded with [Event.Late] set and passed to
// an [EventObserver], never to another request's timeline.
//
// # Cost
//
// The steady state of a service — a keep-alive connection taken from the
// idle pool — allocates two objects per request beyond net/http's own: the
// shallow copy of the request that carries the trace, and one value that is
// both the request's context and the response body's wrapper. The
// recorder, its ClientTrace and hook closures are built once and recycled
// when no hook of the finished request can fire any more. Every event
// handed to an [EventObserver] is a call on the request's path: it must
// return quickly. The unclosed-body warning arms a recycled recorder's
// timer at most once per warning delay, which reports the warnings due
// together in the order the bodies were left open; CaptureStacks costs a
// stack walk and a cleanup registration. Measured against a plain client
// and other tracers: bench/RESULTS.md in the repository.
//
// # Redaction
//
// Every output is redacted: URL user information is removed, query values
// are masked, header values are recorded only when asked for, and
// Authorization, Proxy-Authorization, Cookie and Set-Cookie are always masked.
// An error text may quote what a server sent, which may echo what it was
// sent: [Timeline.RedactError] masks the URL's user name, password and query
// values, those headers' values and the [SecretHeaders]' wherever they
// appear, as sent or Go-quoted, JSON-escaped or percent-encoded (a value of
// 1 or 2 bytes only where it follows its name: "pin=42", "X-Api-Key: ab").
//
// # Nil values
//
// Nothing here panics on nil. A constructor or option given nil (a base
// RoundTripper, a writer, a logger, an observer, or a nil pointer in one)
// returns an error. A method called on a nil *Timeline, *Collector,
// *JSONLines or *Transport returns an error if it returns one
// ([Timeline.WriteText], [Timeline.MarshalJSON], [JSONLines.Err],
// [Collector.Wait], [Transport.RoundTrip], which closes the request's body
// as a RoundTripper must), and otherwise does nothing and returns zero
// values; so does a method given a nil context or function where it needs
// one (an error). The observers here ignore a nil timeline.
package httptrace
