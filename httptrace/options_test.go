package httptrace_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/redact"
)

// TestOptionsRejectNonsense: a bad option is an error at construction.
func TestOptionsRejectNonsense(t *testing.T) {
	base := newBase(t, nil)
	for name, opts := range map[string][]httptrace.Option{
		"nil observer":          {httptrace.WithObserver(nil)},
		"negative idle timeout": {httptrace.BodyIdleTimeout(-1)},
		"empty header name":     {httptrace.Headers("X-Ok", "")},
		"negative warning":      {httptrace.UnclosedBodyWarning(-1)},
		"nil option":            {nil},
	} {
		_, err := httptrace.NewTransport(base, opts...)
		if assert.Error(t, err, name) {
			assert.True(t, strings.HasPrefix(err.Error(), "httptrace: "), "%s: %v", name, err)
		}
	}
	_, err := httptrace.NewTransport(nil)
	assert.Error(t, err, "nil base")
	tr, err := httptrace.NewTransport(base)
	require.NoError(t, err)
	assert.Same(t, base, tr.Base())
}

// TestObserversAdd: each WithObserver adds an observer; each sees every
// timeline once, in the order given.
func TestObserversAdd(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var seen []string
	obs := func(name string) httptrace.Observer {
		return httptrace.ObserverFunc(func(*httptrace.Timeline) { seen = append(seen, name) })
	}
	tr, err := httptrace.NewTransport(newBase(t, nil), httptrace.WithObserver(obs("a")), httptrace.WithObserver(obs("b")))
	require.NoError(t, err)
	fetch(t, tr, srv.URL)
	fetch(t, tr, srv.URL)
	require.Equal(t, []string{"a", "b", "a", "b"}, seen)
}

// TestAttemptNumber: a retry policy's attempt number reaches the timeline.
func TestAttemptNumber(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tr, c := traced(t, newBase(t, nil), nil)
	for n := 1; n <= 2; n++ {
		resp, err := tr.RoundTrip(newRequest(t, hook.WithAttempt(guardCtx(t), n), http.MethodGet, srv.URL, nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	fetch(t, tr, srv.URL)
	tls := waitTimelines(t, c, 3)
	require.Len(t, tls, 3)
	assert.Equal(t, []int{1, 2, 0}, []int{tls[0].Attempt, tls[1].Attempt, tls[2].Attempt})
	assert.Equal(t, 2, hook.Attempt(hook.WithAttempt(t.Context(), 2)))
	assert.Equal(t, 0, hook.Attempt(t.Context()))
}

// warnings is an event observer that passes on the warnings of bodies left
// open.
type warnings chan httptrace.Event

func (w warnings) Observe(*httptrace.Timeline) {}

func (w warnings) ObserveEvent(tl *httptrace.Timeline, ev httptrace.Event) {
	if ev.Kind == "body-held" || ev.Kind == "body-collected" {
		select {
		case w <- ev:
		default:
		}
	}
}

// next returns the next warning, running the garbage collector meanwhile
// when gc is set; the wait is bounded.
func (w warnings) next(t *testing.T, gc bool) httptrace.Event {
	t.Helper()
	ctx := guardCtx(t)
	for range 200 {
		if gc {
			runtime.GC()
		}
		select {
		case ev := <-w:
			return ev
		case <-ctx.Done():
			t.Fatal("no warning")
		case <-time.After(20 * time.Millisecond): // a bound on this wait, not a synchronisation
		}
	}
	t.Fatal("no warning")
	return httptrace.Event{}
}

// TestUnclosedBodyWarning: a body still open past the threshold is reported
// ("body-held") and logged as a warning naming the request, its connection
// and where it was made; a body dropped without Close is reported once
// garbage collected ("body-collected"), whether it was read to EOF or never
// read (its connection pinned); each warning is logged once per call site;
// URLs are redacted; a body never closed never finishes its timeline.
func TestUnclosedBodyWarning(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var log lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	w := make(warnings, 4)
	logged, err := httptrace.NewSlogObserver(logger, slog.LevelDebug, slog.LevelWarn)
	require.NoError(t, err)
	obs := httptrace.Multi(w, logged)
	tr, c := traced(t, newBase(t, nil), []httptrace.Observer{obs},
		httptrace.UnclosedBodyWarning(10*time.Millisecond), httptrace.CaptureStacks())
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel() // frees the connection a dropped body pins

	held, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL+"/held?token=tok-SECRET", nil))
	require.NoError(t, err)
	ev := w.next(t, false)
	assert.Equal(t, httptrace.Kind("body-held"), ev.Kind)
	assert.GreaterOrEqual(t, time.Duration(ev.N), 10*time.Millisecond, "the body's age")
	require.NoError(t, held.Body.Close())

	drop := func(path string, read bool) {
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL+path, nil)) // one call site
		require.NoError(t, err)
		if read {
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
		}
	}
	drop("/read", true)
	w.next(t, false) // held first: the threshold is shorter than any GC wait
	ev = w.next(t, true)
	assert.Equal(t, httptrace.Kind("body-collected"), ev.Kind)
	assert.Equal(t, int64(2), ev.N, "the bytes read")
	drop("/unread", false)
	w.next(t, false)
	ev = w.next(t, true)
	assert.Equal(t, httptrace.Kind("body-collected"), ev.Kind)
	assert.Zero(t, ev.N)

	records := strings.Split(strings.TrimSpace(log.String()), "\n")
	var held2, collected int
	for _, line := range records {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		switch rec["msg"] {
		case "response body not closed":
			held2++
			if held2 == 1 {
				assert.Equal(t, "WARN", rec["level"])
				assert.Equal(t, srv.URL+"/held?token="+redact.Masked, rec["url"])
				assert.Contains(t, rec, "conn")
				assert.Contains(t, rec["opened_at"], "TestUnclosedBodyWarning")
				assert.NotContains(t, rec, "fix", "the stack says where: nothing to fix")
			}
		case "response body garbage collected without Close":
			collected++
			assert.Contains(t, rec["opened_at"], "TestUnclosedBodyWarning")
		}
	}
	// held: /held, then one for the two drops' call site; collected: one
	// for that call site.
	assert.Equal(t, 2, held2, "held warnings, once per call site: %s", log.String())
	assert.Equal(t, 1, collected, "collected warnings, once per call site: %s", log.String())
	assert.NotContains(t, log.String(), "tok-SECRET")
	require.Len(t, c.Timelines(), 1, "only the closed body finished its timeline")
}

// closeProbe is a response body that records whether its request's context
// had ended when it was closed.
type closeProbe struct {
	io.Reader
	ctx        context.Context
	errAtClose error
}

func (b *closeProbe) Close() error {
	b.errAtClose = b.ctx.Err()
	return nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBodyIdleContextOutlivesTheBaseClose: the body idle watchdog's context
// ends only once the base body's Close returned. An HTTP/2 body's Close
// waits for its stream's clean-up (which closes a connection the server
// sent GOAWAY on) unless the request's context has ended: ending it first
// would make the traced Transport return from Close before net/http
// finished, as it does not without the watchdog.
func TestBodyIdleContextOutlivesTheBaseClose(t *testing.T) {
	var probe *closeProbe
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		probe = &closeProbe{Reader: strings.NewReader("ok"), ctx: r.Context()}
		return &http.Response{StatusCode: 200, Proto: "HTTP/2.0", ProtoMajor: 2, Body: probe, Request: r}, nil
	})
	tr, c := traced(t, base, nil, httptrace.BodyIdleTimeout(time.Hour))
	resp, err := tr.RoundTrip(newRequest(t, guardCtx(t), http.MethodGet, "https://127.0.0.1:1/", nil))
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.NoError(t, probe.errAtClose, "the request's context was live while the base body closed")
	assert.Error(t, probe.ctx.Err(), "and ended once it had: the watchdog holds nothing")
	tls := waitTimelines(t, c, 1)
	assert.Equal(t, httptrace.Class("ok"), tls[0].Outcome.Class)
}
