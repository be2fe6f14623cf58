package httptrace_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/testkit"
)

// heldOrder records the timelines of the "body-held" events in the order
// they came, and signals each.
type heldOrder struct {
	mu  sync.Mutex
	ids []uint64
	ch  chan struct{}
}

func (h *heldOrder) Observe(*httptrace.Timeline) {}

func (h *heldOrder) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	if ev.Kind != httptrace.KindBodyHeld {
		return
	}
	h.mu.Lock()
	h.ids = append(h.ids, tl.ID)
	h.mu.Unlock()
	h.ch <- struct{}{}
}

// TestUnclosedBodyWarningsInOrder: bodies left open one after the other
// are reported in that order, though their warnings fall due together
// (net/http's timers then start their callbacks in no set order, the last
// often first); the slog observer, which warns once per place, names the
// first body left open, and how to learn where it was opened.
func TestUnclosedBodyWarningsInOrder(t *testing.T) {
	const bodies = 5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	for round := range 5 {
		held := &heldOrder{ch: make(chan struct{}, bodies)}
		var logged bytes.Buffer
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		warn, err := httptrace.NewSlogObserver(logger, slog.LevelDebug, slog.LevelWarn)
		require.NoError(t, err)
		base := &http.Transport{}
		tr, err := httptrace.NewTransport(base, httptrace.WithObserver(held), httptrace.WithObserver(warn),
			httptrace.UnclosedBodyWarning(20*time.Millisecond))
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		var open []*http.Response
		for range bodies {
			resp, err := client.Get(srv.URL)
			require.NoError(t, err)
			open = append(open, resp)
		}
		ctx := testkit.Bounded(t)
		for range bodies {
			select {
			case <-held.ch:
			case <-ctx.Done():
				t.Fatalf("round %d: %d of %d warnings", round, len(held.ids), bodies)
			}
		}
		for _, resp := range open {
			resp.Body.Close()
		}
		base.CloseIdleConnections()
		held.mu.Lock()
		ids := held.ids
		held.mu.Unlock()
		require.True(t, slices.IsSorted(ids), "round %d: warnings in the order %v", round, ids)
		logMu.Lock()
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		logMu.Unlock()
		require.Len(t, lines, 1, "once per method and host")
		require.Contains(t, lines[0], " id="+itoa(ids[0])+" ", "the first body left open")
		require.Contains(t, lines[0], "with pool.CaptureStacks()", "no stack: how to get one")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
