// Package testserver holds the loopback servers that the module's tests
// share. It is not API.
package testserver

import (
	"net"
	"sync"
	"testing"

	"github.com/connaudit/connaudit/internal/loopback"
)

// Raw accepts TCP connections on 127.0.0.1 and serves each on its own
// goroutine, closing the connection when serve returns. When the test ends,
// the listener and every connection are closed and the goroutines waited
// for.
func Raw(t testing.TB, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: listen on loopback: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln
}

// FreePort returns a loopback address, "127.0.0.1:port", on which nothing
// listens now, for a server the test starts (nginx, Apache) to listen on:
// it listens on a port the system chooses and closes the listener, so that
// another could take the port first (rarely). A refused connect wants
// [ClosedPort].
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := loopback.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ClosedPort returns a loopback address on which nothing listens
// ([loopback.ClosedPort]): a connect to it is refused, and the port stays
// held until the test ends.
func ClosedPort(t testing.TB) string {
	t.Helper()
	addr, release, err := loopback.ClosedPort()
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(release)
	return addr
}
