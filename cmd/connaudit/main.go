// Command connaudit audits HTTP client connection pools: it traces a
// request's stages (trace), audits a host's connection reuse (probe) and
// runs the fault catalogue against an embedded loopback server
// (scenarios).
//
// Exit status: 0 when all is well; 1 when the audit or request failed, or a
// run was cut by its deadline or interrupted (serve without a command
// stops when interrupted: 1 only if that cut a session short); 2 on a
// usage error; 3 when the target did not answer (no request got a
// response).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
