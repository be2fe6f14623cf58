// Package faultserver is a real, fault-injecting HTTP server on the loopback
// interface, for auditing HTTP client connection pools.
//
// It works like net/http/httptest: [NewUnstarted] returns a configured but
// unstarted [Server], [Server.Handle] maps exact paths to typed [Fault]
// values, [Server.Start] serves, and [Server.Close] stops everything, waits
// for every goroutine the server started and reports, as a [*CloseError],
// what it had to cut. [New] is NewUnstarted followed by Start.
//
//	s, err := faultserver.New()
//	if err != nil { ... }
//	defer s.Close()
//	s.Handle("/ok", faultserver.OK{})
//	s.Handle("/slow", faultserver.Hang{})
//	s.Handle("/flaky", faultserver.Sequence{Faults: []faultserver.Fault{
//		faultserver.Status{Code: 503}, faultserver.OK{},
//	}})
//
// The server listens on loopback addresses only (127.0.0.0/8, ::1 and
// "localhost"); any other address is refused. [WithTLS] serves HTTPS with a
// self-signed certificate that [Server.ClientTLSConfig] trusts, offering h2
// and http/1.1, so the standard library's HTTP/2 server runs the faults too.
// [WithRawHTTP2] replaces the standard server with a small HTTP/2 server
// written on golang.org/x/net/http2's Framer, which can also send the frames
// the standard server cannot produce on demand: [GoAway] and [RSTStream].
//
// Every request is counted per endpoint ([Server.Counters], [Server.Totals]),
// and a test can wait for events instead of sleeping: [Server.Entered]
// delivers one value per handler entry and [Server.CancelObserved] one value
// per client cancellation a handler observed.
//
// Below HTTP, [NewTLSStall] accepts TCP connections and never answers the
// TLS handshake, [NewConnectHang] makes TCP connects hang by filling a
// listener's accept queue, and [ClosedPort] names a loopback address on
// which nothing listens. [NewHostile] answers every connection with a
// broken reply of the caller's choosing (arbitrary bytes, when, and how the
// connection ends); [HostileCorpus] is a named set of them: garbage,
// truncated status lines, oversized headers, bad chunking, lying or
// conflicting Content-Lengths, HTTP/0.9, 1xx floods, a TLS alert and a reply
// before the request.
//
// Nothing in this package prints or exits; the standard server's error log is
// discarded.
package faultserver
