package faultserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/connaudit/connaudit/internal/loopback"
)

// selfSigned returns a fresh self-signed certificate for 127.0.0.1, ::1,
// localhost and the listening address ip, usable as its own root.
func selfSigned(ip net.IP) (tls.Certificate, *x509.Certificate, error) {
	cert, err := loopback.SelfSigned("connaudit faultserver", "localhost", ip)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("faultserver: %w", err)
	}
	return cert, cert.Leaf, nil
}
