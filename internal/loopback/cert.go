package loopback

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority for loopback servers: a fresh self-signed
// CA certificate, which names no server and only signs certificates, and
// its key. A client trusts Cert; a server presents a certificate from
// [CA.Leaf], never Cert itself (a strict verifier, rustls's, refuses a CA
// certificate as a server's).
type CA struct {
	// Cert is the CA certificate, the root a client trusts.
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	org  string
}

// NewCA returns a fresh CA, valid from an hour ago for a week, whose
// subject is org and cn.
func NewCA(org, cn string) (*CA, error) {
	key, tmpl, err := template(org, cn)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &CA{Cert: cert, key: key, org: org}, nil
}

// PEM returns the CA certificate alone, PEM-encoded: a client's trust.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Leaf returns a fresh server certificate signed by ca for 127.0.0.1, ::1,
// localhost and the listening address ip (nil: none), valid from an hour ago
// for a week: not a CA, for server authentication only. Its chain is the
// leaf then the CA certificate; its Leaf is set. Its subject is the CA's
// organization and cn.
func (ca *CA) Leaf(cn string, ip net.IP) (tls.Certificate, error) {
	key, tmpl, err := template(ca.org, cn)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.BasicConstraintsValid = true
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip != nil && !ip.Equal(tmpl.IPAddresses[0]) && !ip.Equal(tmpl.IPAddresses[1]) {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("creating certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// template returns a fresh key and a certificate template with a random
// serial, the subject org and cn, valid from an hour ago for a week.
func template(org, cn string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial: %w", err)
	}
	now := time.Now()
	return key, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{org}, CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
	}, nil
}
