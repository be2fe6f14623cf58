package httptrace_test

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
)

// TestOptionsRejectNonsense: a bad option is an error at construction.
func TestOptionsRejectNonsense(t *testing.T) {
	base := newBase(t, nil)
	for name, opts := range map[string][]httptrace.Option{
		"nil observer":          {httptrace.WithObserver(nil)},
		"negative idle timeout": {httptrace.WithBodyIdleTimeout(-1)},
		"empty header name":     {httptrace.WithHeaders("X-Ok", "")},
		"nil unclosed report":   {httptrace.WithUnclosedBodyReport(nil)},
	} {
		_, err := httptrace.NewTransport(base, opts...)
		assert.Error(t, err, name)
	}
	_, err := httptrace.NewTransport(nil)
	assert.Error(t, err, "nil base")
	tr, err := httptrace.NewTransport(base)
	require.NoError(t, err)
	assert.Same(t, base, tr.Base())
}

// TestKindNames: every kind has a stable name that parses back.
func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := httptrace.KindGetConn; k <= httptrace.KindDone; k++ {
		name := k.String()
		assert.NotEqual(t, "unknown", name)
		assert.False(t, seen[name], "duplicate name %s", name)
		seen[name] = true
		got, ok := httptrace.ParseKind(name)
		assert.True(t, ok)
		assert.Equal(t, k, got)
	}
	assert.Equal(t, "unknown", httptrace.Kind(0).String())
	assert.Equal(t, "unknown", (httptrace.KindDone + 1).String())
	_, ok := httptrace.ParseKind("nope")
	assert.False(t, ok)
}

// TestAttemptNumber: a retry policy's attempt number reaches the timeline.
func TestAttemptNumber(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tr, c := traced(t, newBase(t, nil), nil)
	for n := 1; n <= 2; n++ {
		resp, err := tr.RoundTrip(newRequest(t, httptrace.WithAttempt(guardCtx(t), n), http.MethodGet, srv.URL, nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
	fetch(t, tr, srv.URL)
	tls := waitTimelines(t, c, 3)
	require.Len(t, tls, 3)
	assert.Equal(t, []int{1, 2, 0}, []int{tls[0].Attempt, tls[1].Attempt, tls[2].Attempt})
	assert.Equal(t, 2, httptrace.AttemptFromContext(httptrace.WithAttempt(t.Context(), 2)))
	assert.Equal(t, 0, httptrace.AttemptFromContext(t.Context()))
}

// TestUnclosedBodyReport: a body read to EOF (so its connection went back
// to the pool) but never closed is reported once it is garbage collected,
// with a redacted URL and no reference to the response.
func TestUnclosedBodyReport(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	reports := make(chan httptrace.UnclosedBody, 1)
	tr, c := traced(t, newBase(t, nil), nil, httptrace.WithUnclosedBodyReport(func(u httptrace.UnclosedBody) {
		select {
		case reports <- u:
		default:
		}
	}))

	func() {
		resp, err := tr.RoundTrip(newRequest(t, guardCtx(t), http.MethodGet, srv.URL+"/leak?token=tok-SECRET", nil))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		// no Close
	}()
	runtime.GC()
	var u httptrace.UnclosedBody
	select {
	case u = <-reports:
	case <-guardCtx(t).Done():
		t.Fatal("no report for the unclosed body")
	}
	assert.NotZero(t, u.Timeline)
	assert.Equal(t, http.MethodGet, u.Method)
	assert.Equal(t, srv.URL+"/leak?token="+httptrace.Masked, u.URL)
	assert.False(t, strings.Contains(u.URL, "tok-SECRET"))
	assert.Empty(t, c.Timelines(), "a body never closed never finishes its timeline")
}
