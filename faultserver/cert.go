package faultserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/connaudit/connaudit/internal/loopback"
)

// issue returns a fresh certificate for 127.0.0.1, ::1, localhost and the
// listening address ip, signed by a fresh CA, and that CA's certificate.
func issue(ip net.IP) (tls.Certificate, *x509.Certificate, error) {
	ca, err := loopback.NewCA("connaudit faultserver", "connaudit faultserver CA")
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("faultserver: %w", err)
	}
	cert, err := ca.Leaf("localhost", ip)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("faultserver: %w", err)
	}
	return cert, ca.Cert, nil
}

// root returns the last certificate of cert's chain: its CA when the chain
// ends with it, the certificate itself when it is alone.
func root(cert tls.Certificate) (*x509.Certificate, error) {
	if len(cert.Certificate) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	last := cert.Certificate[len(cert.Certificate)-1]
	if cert.Leaf != nil && len(cert.Certificate) == 1 {
		return cert.Leaf, nil
	}
	return x509.ParseCertificate(last)
}
