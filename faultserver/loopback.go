package faultserver

import (
	"fmt"
	"net"
	"net/netip"
)

// loopbackAddr checks that addr ("host:port") names a loopback address and
// returns the address to listen on. "localhost" is mapped to 127.0.0.1 so
// that no name is ever looked up.
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("faultserver: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	ip, err := netip.ParseAddr(host)
	ip = ip.Unmap()
	if err != nil || ip.Zone() != "" || !ip.IsLoopback() {
		return "", fmt.Errorf("faultserver: refusing to listen on %q: only loopback addresses (127.0.0.0/8, ::1, localhost) are allowed", addr)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// listenLoopback listens on addr after checking it, and checks again what the
// system actually bound.
func listenLoopback(addr string) (net.Listener, error) {
	a, err := loopbackAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("faultserver: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("faultserver: listener bound to non-loopback address %v", ln.Addr())
	}
	return ln, nil
}
