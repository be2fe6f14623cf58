package faultserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/connaudit/connaudit/faultserver"
)

// The net/http Transport's hidden retry, made visible: on a kept-alive
// connection the server closes the connection after reading the second
// request; the Transport replays it on a new connection and the caller never
// knows.
func Example() {
	s, err := faultserver.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/x", faultserver.CloseBeforeResponse{After: 1})

	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(s.URL() + "/x")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	c := s.Counters("/x")
	fmt.Printf("client requests: 2, server read: %d on %d connections\n", c.RequestsRead, c.ConnsAccepted)
	// Output:
	// 200 OK
	// 200 OK
	// client requests: 2, server read: 3 on 2 connections
}

// A kept-alive connection closed just as the client sends its next request
// on it: the server never reads that request, and the Transport sends it
// again on a new connection. The caller sees two successes; the server read
// two requests and left one unread, on two connections.
func ExampleCloseBeforeRead() {
	s, err := faultserver.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/x", faultserver.CloseBeforeRead{After: 1})

	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(s.URL() + "/x")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	c := s.Counters("/x")
	fmt.Printf("read %d, unread %d, on %d connections\n", c.RequestsRead, c.Unread, c.ConnsAccepted)
	// Output:
	// 200 OK
	// 200 OK
	// read 2, unread 1, on 2 connections
}

// A retry test: the endpoint answers 503 twice, then 200.
func ExampleSequence() {
	s, err := faultserver.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/flaky", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.Status{Code: 503}, faultserver.Status{Code: 503}, faultserver.OK{},
	}})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(s.URL() + "/flaky")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 503
	// 503
	// 200
}

// HTTP/2 over TLS from the standard library's server: the client trusts the
// server's certificate and attempts HTTP/2.
func ExampleTLS() {
	s, err := faultserver.New(faultserver.TLS())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/big", faultserver.LargeBody{Size: 1 << 20})

	tr := &http.Transport{TLSClientConfig: s.ClientTLSConfig(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/big")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Proto, resp.Status, n, "bytes")
	// Output:
	// HTTP/2.0 200 OK 1048576 bytes
}

// Raw HTTP/2 frames: a GOAWAY that leaves the request unprocessed, which the
// client retries on a new connection.
func ExampleRawHTTP2() {
	s, err := faultserver.New(faultserver.RawHTTP2())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/x", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.GoAway{}, faultserver.OK{}}})

	tr := &http.Transport{TLSClientConfig: s.ClientTLSConfig(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/x")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c := s.Counters("/x")
	fmt.Println(resp.Proto, resp.Status, string(body))
	fmt.Printf("server read %d requests on %d connections\n", c.RequestsRead, c.ConnsAccepted)
	// Output:
	// HTTP/2.0 200 OK ok
	// server read 2 requests on 2 connections
}

// Waiting on the server's signals instead of sleeping: the client cancels
// once its request has reached the handler, and the server observes it.
func ExampleServer_Entered() {
	s, err := faultserver.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Handle("/hang", faultserver.Hang{})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.Entered("/hang")
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/hang", nil)
	_, err = (&http.Client{Transport: tr}).Do(req)
	fmt.Println(errors.Is(err, context.Canceled))
	<-s.CancelObserved("/hang")
	fmt.Printf("%+v\n", s.Counters("/hang"))
	fmt.Println(s.Close())
	// Output:
	// true
	// {ConnsAccepted:1 RequestsRead:1 HandlersEntered:1 CancelsObserved:1 WritesCommitted:0 Unread:0 DarkConns:0}
	// <nil>
}

// Close cuts a handler that is still running and says so.
func ExampleServer_Close() {
	s, err := faultserver.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Handle("/hang", faultserver.Hang{})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		_, err := (&http.Client{Transport: tr}).Get(s.URL() + "/hang")
		errc <- err
	}()
	<-s.Entered("/hang")
	fmt.Println(s.Close())
	fmt.Println(errors.Is(<-errc, io.EOF))
	// Output:
	// faultserver: Close cut 1 active connection, 1 handler still running
	// true
}

// A TLS handshake that never completes, ended by the client's
// TLSHandshakeTimeout.
func ExampleNewTLSStall() {
	st, err := faultserver.NewTLSStall()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	tr := &http.Transport{TLSHandshakeTimeout: 100 * time.Millisecond}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get(st.URL() + "/")
	fmt.Println(strings.HasSuffix(err.Error(), "net/http: TLS handshake timeout"))
	<-st.Accepted()
	fmt.Println(st.ConnsAccepted(), "connection accepted")
	// Output:
	// true
	// 1 connection accepted
}

// A TCP connect that hangs, ended by the dialer's timeout.
func ExampleNewConnectHang() {
	h, err := faultserver.NewConnectHang()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	d := &net.Dialer{Timeout: 100 * time.Millisecond}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get(h.URL() + "/")
	var ne net.Error
	fmt.Println(errors.As(err, &ne) && ne.Timeout())
	// Output:
	// true
}
