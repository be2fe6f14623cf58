package probe_test

import (
	"io"
	"log"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quietLog is a server error log that drops the handshake errors the
// tests cause on purpose.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
