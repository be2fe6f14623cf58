package httptrace

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/connaudit/connaudit/internal/redact"
	"github.com/connaudit/connaudit/internal/vocab"
)

// WriteText writes tl as a text waterfall: the request, the connection
// that served it (new or reused, addresses, TLS), the outcome and each
// stage's duration with a bar ("get conn" is [Timings].PoolWait); verbose adds every event and, with
// [CaptureStacks], where the request was made. The output is redacted.
func (tl *Timeline) WriteText(w io.Writer, verbose bool) error {
	switch {
	case tl == nil:
		return errNilTimeline
	case w == nil:
		return errors.New("httptrace: WriteText: nil writer")
	}
	var b strings.Builder
	t := tl.Timings()
	fmt.Fprintf(&b, "%s %s\n", tl.Method, tl.URL())
	conn := "reused"
	_, got := tl.First(vocab.KindGotConn)
	switch {
	case !got:
		conn = "none: the request got no connection"
	case t.NewConn:
		conn = "new"
	case tl.Conn.WasIdle:
		conn = fmt.Sprintf("reused, idle for %s", fmtDur(t.IdleFor))
	}
	if tl.Conn.ID != 0 {
		fmt.Fprintf(&b, "  connection  #%d %s", tl.Conn.ID, conn)
	} else {
		fmt.Fprintf(&b, "  connection  %s", conn)
	}
	if tl.Conn.Local != nil && tl.Conn.Remote != nil {
		fmt.Fprintf(&b, "  %s -> %s", tl.Conn.Local, tl.Conn.Remote)
	}
	b.WriteByte('\n')
	if tl.TLS.Done && tl.TLS.Version == 0 {
		b.WriteString("  tls         handshake failed\n")
	}
	if tl.TLS.Done && tl.TLS.Version != 0 {
		fmt.Fprintf(&b, "  tls         %s %s", tls.VersionName(tl.TLS.Version), tls.CipherSuiteName(tl.TLS.CipherSuite))
		if tl.TLS.ALPN != "" {
			fmt.Fprintf(&b, " alpn=%s", tl.TLS.ALPN)
		}
		if tl.TLS.Resumed {
			b.WriteString(" resumed")
		}
		b.WriteByte('\n')
	}
	if tl.Status != 0 {
		fmt.Fprintf(&b, "  response    %d %s, %d body bytes", tl.Status, tl.Proto, tl.BodyBytes)
		if tl.ClosedEarly {
			b.WriteString(", closed before EOF")
		}
		b.WriteByte('\n')
	}
	outcome := string(tl.Outcome.Class)
	if tl.Outcome.Class != vocab.ClassOK {
		outcome += " @" + string(tl.Outcome.Stage)
	}
	if tl.Outcome.Err != nil {
		outcome += ": " + tl.RedactError(tl.Outcome.Err)
	}
	fmt.Fprintf(&b, "  outcome     %s\n", outcome)
	if tl.Retries > 0 {
		fmt.Fprintf(&b, "  note        the Transport sent the request again on another connection %d time(s): a hidden retry\n", tl.Retries)
	}
	// PoolWait is shown as "get conn": for a request that took an idle
	// connection or dialed its own, it is the Transport's own
	// bookkeeping, not a wait for another request.
	stages := []struct {
		name string
		d    time.Duration
	}{
		{"get conn", t.PoolWait}, {"dns", t.DNS}, {"connect", t.Connect}, {"tls", t.TLS},
		{"write", t.Write}, {"server", t.Server}, {"transfer", t.Transfer},
	}
	// The times are right-aligned in one column as wide as the widest, at
	// least 10 characters: a stage of minutes or an event hours in keeps
	// the columns straight.
	col := len(fmtDur(t.Total))
	for _, s := range stages {
		col = max(col, len(fmtDur(s.d)))
	}
	for _, e := range tl.Events {
		col = max(col, len(fmtDur(e.At)))
	}
	col = max(col, 10)
	const width = 40
	for _, s := range stages {
		bar := 0
		if t.Total > 0 {
			bar = int(int64(width) * int64(s.d) / int64(t.Total))
		}
		if s.d > 0 && bar == 0 {
			bar = 1
		}
		fmt.Fprintf(&b, "  %-10s %*s", s.name, col, fmtDur(s.d))
		if bar > 0 {
			fmt.Fprintf(&b, "  %s", strings.Repeat("#", bar))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "  %-10s %*s\n", "total", col, fmtDur(t.Total))
	if verbose {
		writeEvents(&b, tl, col)
		if st := tl.Stack(); st != "" {
			b.WriteString("  made at\n")
			for line := range strings.Lines(st) {
				b.WriteString("    " + redact.Printable(strings.TrimSuffix(line, "\n")) + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeEvents writes tl's events, their times right-aligned in a column
// col wide.
func writeEvents(b *strings.Builder, tl *Timeline, col int) {
	b.WriteString("  events\n")
	for _, e := range tl.Events {
		fmt.Fprintf(b, "    %*s  %s", col, fmtDur(e.At), e.Kind)
		if e.Conn != 0 {
			fmt.Fprintf(b, " conn=#%d", e.Conn)
		}
		if e.Addr != "" {
			fmt.Fprintf(b, " %s", redact.Printable(e.Addr))
		}
		if e.N != 0 {
			fmt.Fprintf(b, " n=%d", e.N)
		}
		if e.Err != nil {
			fmt.Fprintf(b, " err=%q", tl.RedactError(e.Err))
		}
		if e.Late {
			b.WriteString(" (late)")
		}
		b.WriteByte('\n')
	}
}

// fmtDur writes d in milliseconds with three decimals, whatever its size,
// so that times in one column compare at a glance.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}
