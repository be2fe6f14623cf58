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

// ClosedPort returns a loopback address on which nothing listens
// ([loopback.ClosedPort]): a connect to it is refused.
func ClosedPort(t testing.TB) string {
	t.Helper()
	addr, err := loopback.ClosedPort()
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return addr
}
