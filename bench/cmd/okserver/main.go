// Command okserver serves "ok" (with a Content-Length, keep-alive) to every
// request, on a loopback address only, for the benchmarks and compare.sh
// to measure a client in a process of its own.
//
//	okserver [-addr 127.0.0.1:0] [-max-time 1h] [-read-body]
//
// With -read-body it reads each request's body whole before it answers
// (an upload's sink: bench/proxy.sh streams 1 GiB through the proxy to it);
// the answer is then the number of bytes read.
//
// It prints its URL (http://ADDR/ok) on the first line of standard output,
// and stops on SIGINT or SIGTERM, or by itself after -max-time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address; must be a loopback address")
	maxTime := flag.Duration("max-time", time.Hour, "stop by itself after this long")
	readBody := flag.Bool("read-body", false, "read each request's body whole, and answer its length")
	flag.Parse()
	if err := run(*addr, *maxTime, *readBody); err != nil {
		fmt.Fprintln(os.Stderr, "okserver:", err)
		os.Exit(1)
	}
}

func run(addr string, maxTime time.Duration, readBody bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %s: not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	body := []byte("ok")
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if readBody {
				n, err := io.Copy(io.Discard, r.Body)
				if err != nil {
					w.WriteHeader(http.StatusBadRequest)
				}
				fmt.Fprint(w, n)
				return
			}
			w.Write(body)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Printf("http://%s/ok\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
