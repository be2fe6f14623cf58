package main

import (
	"context"
	"fmt"
	"io"
)

func runProbe(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "connaudit probe: not built yet")
	return exitUsage
}
