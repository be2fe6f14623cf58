// Command plainloop is the baseline of compare.sh: it sends N GETs to a
// loopback URL one after the other through a bare http.Client whose
// transport keeps one connection alive (MaxConnsPerHost=1), reads each body
// to EOF and closes it, and prints the rate — what `connaudit probe -n N`
// does, without tracing, tracking or a report. Each request is bounded by
// the client's Timeout (-timeout, 30 s like the probe's default; 0: no
// bound).
//
//	plainloop [-n 2000] [-timeout 30s] URL
//
// The time counted runs from before the first request (its dial included,
// as in the probe) to after the last body was closed.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	n := flag.Int("n", 2000, "number of requests")
	timeout := flag.Duration("timeout", 30*time.Second, "bound on each request (http.Client.Timeout); 0: none")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: plainloop [-n N] [-timeout D] URL")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 || *timeout < 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *n, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "plainloop:", err)
		os.Exit(1)
	}
}

func run(target string, n int, timeout time.Duration) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme != "http" || (u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return fmt.Errorf("%s: want an http URL on a loopback address", target)
	}
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout}
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	for i := range n {
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("plainloop: %d requests in %v: %.0f req/s (elapsed_ns %d)\n", n, elapsed.Round(time.Microsecond), float64(n)/elapsed.Seconds(), elapsed.Nanoseconds())
	return nil
}
