package serve

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCertificate: CONNAUDIT_CA's content is one CA certificate, naming no
// server; each HTTPS fault listener presents a leaf of its own signed by it,
// not a CA, for the loopback names, which a client trusting the CA file
// alone verifies (rustls refuses a CA certificate as a server's).
func TestCertificate(t *testing.T) {
	srv, err := New()
	require.NoError(t, err)
	defer srv.Close()

	block, rest := pem.Decode(srv.CA())
	require.NotNil(t, block, "the CA file is PEM")
	require.Empty(t, rest, "the CA file holds one certificate, the CA alone")
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, ca.IsCA, "the CA file holds a CA")
	require.NotZero(t, ca.KeyUsage&x509.KeyUsageCertSign)
	require.Empty(t, ca.DNSNames, "the CA names no server")
	require.Empty(t, ca.IPAddresses, "the CA names no server")

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(srv.CA()))
	for _, i := range []listener{1, 2} {
		addr := srv.faults[i].Addr()
		for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: name, NextProtos: []string{"h2"}})
			require.NoError(t, err, "listener %d as %s: verified through the CA file alone", i, name)
			leaf := conn.ConnectionState().PeerCertificates[0]
			require.NoError(t, conn.Close())
			require.False(t, leaf.IsCA, "listener %d: the served certificate is not a CA", i)
			require.NotEqual(t, ca.Raw, leaf.Raw, "listener %d: the CA file does not hold the served certificate", i)
			require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)
			require.Contains(t, leaf.DNSNames, "localhost")
		}
	}
}
