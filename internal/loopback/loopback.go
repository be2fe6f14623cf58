// Package loopback listens on loopback addresses only, and makes the
// certificates served there: a CA, and the certificates it signs. It is
// what the module's test servers (the fault server, connaudit serve, the
// hostile server, the shared test servers) stand on, so that none of them
// can ever listen on, or send to, anything but the local machine. It is not
// API.
package loopback

import (
	"fmt"
	"net"
	"net/netip"
)

// Addr checks that addr ("host:port") names a loopback address and returns
// the address to listen on: an IP address in 127.0.0.0/8 or ::1 (an
// IPv4-mapped one unmapped), or "localhost", mapped to 127.0.0.1 so that no
// name is ever looked up. Anything else, an empty host included, is an
// error.
func Addr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "localhost" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	ip, err := netip.ParseAddr(host)
	ip = ip.Unmap()
	if err != nil || ip.Zone() != "" || !ip.IsLoopback() {
		return "", fmt.Errorf("refusing to listen on %q: only loopback addresses (127.0.0.0/8, ::1, localhost) are allowed", addr)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// Listen listens for TCP on addr after checking it with [Addr], and checks
// again what the system actually bound. "127.0.0.1:0" gives a
// system-chosen port.
func Listen(addr string) (net.Listener, error) {
	a, err := Addr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, err
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("listener bound to non-loopback address %v", ln.Addr())
	}
	return ln, nil
}

// ClosedPort returns a loopback address, "127.0.0.1:port", on which nothing
// listens, so a connect is refused (ECONNREFUSED), and release, which frees
// the port: until then the port is held by a socket bound to it that does
// not listen, so that no other listener (of another test, another process)
// can take it, on 127.0.0.1 nor, where the machine has IPv6, on ::1 (a
// client given "localhost" may try either), and no connection of the
// machine's own gets it as its local port (a connect to it then reaching
// itself). Where sockets cannot be made so (not a Unix), the port is found
// by listening and closing, and another process could take it afterwards.
func ClosedPort() (addr string, release func(), err error) {
	return closedPort()
}
