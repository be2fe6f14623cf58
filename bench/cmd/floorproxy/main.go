// Command floorproxy is the floor bench/proxy.sh measures connaudit proxy
// against: a bare httputil.ReverseProxy on one http.Server, its transport
// tuned (idle connections enough for every concurrency the script runs,
// no proxy from the environment), with nothing accounted. What it gets
// is what any Go reverse proxy gets on the machine.
//
//	floorproxy -upstream URL [-listen 127.0.0.1:0] [-max-time 1h]
//
// It prints its URL on the first line of standard output, and stops on
// SIGINT or SIGTERM, or by itself after -max-time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	upstream := flag.String("upstream", "", "the upstream's URL")
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	maxTime := flag.Duration("max-time", time.Hour, "stop by itself after this long")
	flag.Parse()
	if err := run(*upstream, *listen, *maxTime); err != nil {
		fmt.Fprintln(os.Stderr, "floorproxy:", err)
		os.Exit(1)
	}
}

func run(upstream, listen string, maxTime time.Duration) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-upstream %q: not a URL with a host", upstream)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host },
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	fmt.Printf("http://%s/\n", ln.Addr())

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
	err = srv.Shutdown(shut)
	tr.CloseIdleConnections()
	if err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
