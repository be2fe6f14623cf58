package faultserver

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/notify"
	"golang.org/x/net/http2"
)

// The bounds on what connections hold, shortened for the test.
func shortBounds(t *testing.T) {
	h, i, m, st := headerBound, idleBound, maxOpenConns, maxStalled
	headerBound, idleBound, maxOpenConns, maxStalled = 300*time.Millisecond, 400*time.Millisecond, 8, 4
	t.Cleanup(func() { headerBound, idleBound, maxOpenConns, maxStalled = h, i, m, st })
}

// closedWithin reads c until it ends, and fails the test unless it does
// within bound (a bound on a hang, not a measured time).
func closedWithin(t *testing.T, c net.Conn, bound time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server held the connection for %v", bound)
	}
}

// TestConnectionsBounded: connections that say nothing are closed once the
// header bound passes; past maxOpenConns a new one is closed as accepted.
func TestConnectionsBounded(t *testing.T) {
	shortBounds(t)
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Handle("/ok", OK{})
	var conns []net.Conn
	for range 3 * maxOpenConns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// Every connection ends: those past the cap at once, the others at
	// the header bound.
	for _, c := range conns {
		closedWithin(t, c, 10*time.Second)
	}
	// The server forgets each once its serving goroutine has seen it end.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := notify.Wait(ctx, &s.mu, &s.changes, func() bool { return len(s.conns) == 0 }); err != nil {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		t.Fatalf("%d connections still open", open)
	}
	if got := s.Totals().ConnsAccepted; got != int64(3*maxOpenConns) {
		t.Fatalf("%d connections accepted, want %d (shed ones included)", got, 3*maxOpenConns)
	}

}

// TestRawHTTP2Bounded: the raw HTTP/2 server closes a connection that
// does not finish its handshake within the header bound, and one that
// sends its preface and then nothing once the idle bound passes.
func TestRawHTTP2Bounded(t *testing.T) {
	shortBounds(t)
	s, err := New(RawHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closedWithin(t, c, 10*time.Second)

	// One that finishes the handshake and sends nothing more, and one
	// that sends its preface and settings, and then nothing.
	for _, preface := range []bool{false, true} {
		tc, err := tls.Dial("tcp", s.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		if preface {
			io.WriteString(tc, http2.ClientPreface)
			http2.NewFramer(tc, tc).WriteSettings()
		}
		closedWithin(t, tc, 10*time.Second)
	}
}

// TestTLSStallBounded: a TLSStall holds at most maxStalled connections;
// others are closed as accepted.
func TestTLSStallBounded(t *testing.T) {
	shortBounds(t)
	st, err := NewTLSStall()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var conns []net.Conn
	for range 2 * maxStalled {
		c, err := net.Dial("tcp", st.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	// Those closed read EOF at once; those held time out.
	eof := make(chan bool, len(conns))
	for _, c := range conns {
		go func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err := c.Read(make([]byte, 1))
			eof <- err == io.EOF
		}()
	}
	closed := 0
	for range conns {
		if <-eof {
			closed++
		}
	}
	if closed != maxStalled {
		t.Fatalf("%d connections closed at once, want %d (those past %d held)", closed, maxStalled, maxStalled)
	}
}
