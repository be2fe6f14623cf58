package otelconnaudit_test

import (
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/stretchr/testify/require"
)

// TestSteadyPathAllocatesNothing feeds an Observer, metrics on through the
// SDK, the events of a request served by an idle connection, as the
// tracer hands them over: once its attribute set exists, recording the
// request allocates nothing (no map, no attribute set).
func TestSteadyPathAllocatesNothing(t *testing.T) {
	s := newSDKs(t)
	o, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(s.mp), otelconnaudit.TracerProvider(s.tp))
	require.NoError(t, err)
	tl := &httptrace.Timeline{ID: 1, Method: "GET", Host: "127.0.0.1:8080", Start: time.Now(),
		Conn: httptrace.ConnInfo{ID: 1, Reused: true, WasIdle: true}, Status: 200, Proto: "HTTP/1.1"}
	events := []httptrace.Event{
		{Kind: "get-conn", At: 1000}, {Kind: "got-conn", At: 2000, Conn: 1, N: 1},
		{Kind: "wrote-headers", At: 3000}, {Kind: "wrote-request", At: 3000},
		{Kind: "first-byte", At: 9000}, {Kind: "response", At: 9500, N: 200},
		{Kind: "put-idle-conn", At: 9800}, {Kind: "body-eof", At: 9900, N: 2},
		{Kind: "body-close", At: 9950, N: 2}, {Kind: "done", At: 9950},
	}
	request := func() {
		tl.Events, tl.Finished = tl.Events[:0], false
		for _, ev := range events {
			tl.Events = append(tl.Events, ev)
			o.ObserveEvent(tl, ev)
		}
		tl.Finished, tl.BodyEOF, tl.BodyClosed, tl.BodyBytes = true, true, true, 2
		o.Observe(tl)
	}
	tl.Events = make([]httptrace.Event, 0, len(events))
	request()
	require.Zero(t, testing.AllocsPerRun(100, request))
	n, _ := hist(t, find(t, s.collect(t), "http.client.request.duration"))
	require.EqualValues(t, 102, n)
}
