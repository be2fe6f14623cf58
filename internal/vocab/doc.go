// Package vocab holds the typed values of connaudit's vocabulary — event
// kinds, outcome classes, stages, connection states, closing sides and close
// reasons — and the one classifier of request errors.
//
// The public packages expose these types by alias (httptrace.Kind,
// httptrace.Class, httptrace.Stage, pool.ConnState, pool.Closer,
// pool.CloseReason) with their values listed in the alias's documentation;
// callers outside the module compare with string literals such as "reset".
// The module's own code uses the constants here so that a typo does not
// compile.
package vocab
