package loopback_test

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestAddrRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{
		"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "10.0.0.1:8080", "example.com:80", "127.0.0.1", "[fe80::1%lo]:0",
		"[::ffff:10.0.0.1]:0", "[::1%lo]:0",
	} {
		_, err := loopback.Addr(addr)
		require.Error(t, err, addr)
		if !strings.Contains(err.Error(), "missing port") {
			require.ErrorContains(t, err, "only loopback addresses", addr)
		}
		ln, err := loopback.Listen(addr)
		require.Error(t, err, addr)
		require.Nil(t, ln)
	}
}

func TestAddrMapsLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:0":          "127.0.0.1:0",
		"127.0.0.1:80":         "127.0.0.1:80",
		"127.1.2.3:0":          "127.1.2.3:0",
		"[::1]:8080":           "[::1]:8080",
		"[::ffff:127.0.0.1]:0": "127.0.0.1:0",
	} {
		got, err := loopback.Addr(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

func TestListen(t *testing.T) {
	ln, err := loopback.Listen("localhost:0")
	require.NoError(t, err)
	defer ln.Close()
	host, _, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
}

func TestClosedPort(t *testing.T) {
	addr, release, err := loopback.ClosedPort()
	require.NoError(t, err)
	defer release()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get("http://" + addr + "/")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	// Held: no other listener takes the port, on 127.0.0.1 nor on ::1
	// (where the machine has IPv6), as a test beside this one, or
	// another process, would otherwise when it asks for a port.
	if runtime.GOOS != "windows" {
		_, err = net.Listen("tcp", addr)
		require.ErrorIs(t, err, syscall.EADDRINUSE, "127.0.0.1")
		if ln6, err := net.Listen("tcp", "[::1]:0"); err == nil {
			ln6.Close() // the machine has IPv6
			_, err = net.Listen("tcp", net.JoinHostPort("::1", port))
			require.ErrorIs(t, err, syscall.EADDRINUSE, "::1")
		}
	}
	release()
	release() // twice is once
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "released")
	ln.Close()
}

// TestCA: the CA names no server and only signs; its leaf, not a CA, is
// verified through it for the loopback names and the listening address
// given, once, and for no other name.
func TestCA(t *testing.T) {
	ca, err := loopback.NewCA("org", "org CA")
	require.NoError(t, err)
	require.True(t, ca.Cert.IsCA)
	require.Equal(t, x509.KeyUsageCertSign, ca.Cert.KeyUsage)
	require.Empty(t, ca.Cert.DNSNames)
	require.Empty(t, ca.Cert.IPAddresses)
	block, rest := pem.Decode(ca.PEM())
	require.NotNil(t, block)
	require.Empty(t, rest, "the PEM holds the CA alone")
	require.Equal(t, ca.Cert.Raw, block.Bytes)

	cert, err := ca.Leaf("cn", net.ParseIP("127.0.0.2"))
	require.NoError(t, err)
	require.False(t, cert.Leaf.IsCA)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, cert.Leaf.ExtKeyUsage)
	require.Equal(t, [][]byte{cert.Leaf.Raw, ca.Cert.Raw}, cert.Certificate)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "127.0.0.2"} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
		require.NoError(t, err, host)
	}
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"})
	require.Error(t, err, "no other name")
	require.Equal(t, "cn", cert.Leaf.Subject.CommonName)
	require.Equal(t, []string{"org"}, cert.Leaf.Subject.Organization)
	same, err := ca.Leaf("cn", net.IPv6loopback)
	require.NoError(t, err)
	require.Len(t, same.Leaf.IPAddresses, 2, "a loopback address is not added twice")
}
