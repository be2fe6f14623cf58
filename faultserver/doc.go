// Package faultserver is a real HTTP server on the loopback interface whose
// endpoints misbehave on purpose. It is for testing how an HTTP client and
// its connection pool cope with faults, as net/http/httptest is for testing
// a client against a server that behaves.
//
// # Faults
//
// A fault is what an endpoint does with every request it reads. Faults are
// plain values of this package's types, all implementing the sealed [Fault]
// interface: answer normally ([OK], [Status], [LargeBody]); close the
// connection after the response ([ConnectionClose]); never answer ([Hang]);
// close or reset the connection instead of answering, after committing a
// write if asked ([CloseBeforeResponse], [Reset]); cut, stall or trickle the
// body ([CloseMidBody], [StallMidBody], [Trickle]); commit a side effect once
// per idempotency key ([Write]); or take the next of a list of faults with
// each request ([Sequence]). [Server.Handle] maps a path, matched exactly,
// to a fault, before or while the server runs; other paths answer 404.
//
// Some faults act on the connection after their response, between
// requests, where HTTP clients keep connections they believe alive: close
// it just as the client sends its next request, without reading that
// request ([CloseBeforeRead]); stop answering and reading anything while
// keeping it open, as a forgotten NAT flow ([GoDark]); close it after the
// N-th response, with or without saying so ([RequestLimit]); close it once
// idle ([IdleClose]). A request the server closed a connection on without
// reading it is counted in [Counters].Unread and reported as a [ConnUnread]
// event. These faults take the client to wait for each response before it
// sends the next request on a connection, as HTTP clients do: a request
// pipelined behind another may already be in the server's buffer.
//
// Not every fault can be produced in every mode; each fault's doc says
// where it can:
//
//	fault                   HTTP/1  HTTPS 1.1  standard h2     RawHTTP2
//	CloseBeforeRead         yes     no         no              yes
//	GoDark                  yes     yes        yes             yes
//	RequestLimit, Announce  yes     yes        yes (GOAWAY)    yes (GOAWAY)
//	RequestLimit, silent    yes     yes        no              yes
//	IdleClose               yes     yes        FIN, no GOAWAY  GOAWAY, FIN
//	GoAway, RSTStream       no      no         no              yes
//	Trickle, Status.After   yes     yes        yes             no
//
// [Server.Handle] panics for a fault its server's mode cannot produce; over
// [TLS], where a client may negotiate either protocol, an HTTP/2 request for
// a fault only HTTP/1 can produce there is answered 501.
//
// # Starting a server
//
// The lifecycle is httptest's: [NewUnstarted] returns a server that listens
// but does not serve yet, [Server.Start] serves, and [New] does both.
// [Server.Close] stops everything, waits for every goroutine the server
// started, and returns a [*CloseError] naming what it had to cut.
//
//	s, err := faultserver.New()
//	if err != nil { ... }
//	defer s.Close()
//	s.Handle("/ok", faultserver.OK{})
//	s.Handle("/slow", faultserver.Hang{})
//	s.Handle("/flaky", faultserver.Sequence{Faults: []faultserver.Fault{
//		faultserver.Status{Code: 503}, faultserver.OK{},
//	}})
//	resp, err := client.Get(s.URL() + "/flaky")
//
// Without options the server speaks plain HTTP/1.1 on 127.0.0.1 with a
// system-chosen port; [Addr] picks another loopback address, and any
// address that is not loopback is refused. The other options choose the
// protocol:
//
//   - [TLS]: HTTPS with a fresh certificate signed by a fresh CA, which the
//     configuration from [Server.ClientTLSConfig] trusts. The server offers
//     h2 and http/1.1, so a client that attempts HTTP/2 (an http.Transport
//     with ForceAttemptHTTP2) gets the faults from the standard library's
//     HTTP/2 server.
//   - [HTTP2Only]: the same, but the server speaks HTTP/2 only.
//   - [RawHTTP2]: HTTP/2 from this package's own server, written frame
//     by frame on golang.org/x/net/http2's Framer. It is the only mode that
//     can send [GoAway] and [RSTStream] on demand; the faults it supports
//     say so in their doc.
//
// # Counters and signals
//
// The server counts what it observes, per path: [Server.Counters] returns a
// [Counters] snapshot of the connections that delivered a request, the
// requests read, the handlers entered, the client cancellations observed,
// the writes committed, the requests left unread and the connections gone
// dark. [Server.Totals] adds them up over all paths and
// counts every TCP connection accepted. Comparing the requests the server
// read with the attempts the client made shows the net/http Transport's
// hidden retries. A test waits for events instead of sleeping:
// [Server.Entered] delivers one value per handler entry, and
// [Server.CancelObserved] one per client cancellation a handler observed.
//
// # Below HTTP
//
// [NewTLSStall] accepts TCP connections and never answers the TLS
// handshake; [NewConnectHang] makes TCP connects hang by keeping a
// listener's accept queue full. Both count on the client's own timeouts to
// end the attempt.
//
// Nothing in this package prints or exits; the standard server's error log
// is discarded.
package faultserver
