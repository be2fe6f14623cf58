// Command connaudit audits HTTP client connection pools: it traces a
// request's stages (trace), audits a host's connection reuse (probe) and
// runs the fault catalogue against an embedded loopback server
// (scenarios).
//
// Exit status: 0 when all is well, 1 when the audit or request failed (a
// probe the deadline stopped included), 2 on a usage error, 3 when no request
// to the target succeeded (probe).
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
