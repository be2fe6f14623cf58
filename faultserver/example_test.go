package faultserver_test

import (
	"fmt"
	"io"
	"net/http"

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
	s.Handle("/x", faultserver.CloseAfterN{N: 2})

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
