package httptrace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
)

// TestConstructorsRefuseNil: a nil writer, logger, observer or base
// transport, or a nil pointer in one, is an error at construction, not a
// panic at the first request.
func TestConstructorsRefuseNil(t *testing.T) {
	_, err := httptrace.NewJSONLines(nil)
	require.ErrorContains(t, err, "nil writer")
	var buf *bytes.Buffer
	_, err = httptrace.NewJSONLines(buf)
	require.ErrorContains(t, err, "nil writer")
	_, err = httptrace.NewSlogObserver(nil, slog.LevelInfo, slog.LevelWarn)
	require.ErrorContains(t, err, "nil logger")
	_, err = httptrace.NewTransport(&http.Transport{}, httptrace.WithObserver((*httptrace.Collector)(nil)))
	require.ErrorContains(t, err, "nil observer")
	_, err = httptrace.NewTransport((*http.Transport)(nil))
	require.ErrorContains(t, err, "nil base")
	_, err = httptrace.Trace(nil, nil)
	require.ErrorContains(t, err, "nil request")
}

// TestNilValues: methods on nil values return an error where they return
// one, and zero values otherwise, never panic; observers ignore a nil
// timeline.
func TestNilValues(t *testing.T) {
	var tl *httptrace.Timeline
	require.ErrorContains(t, tl.WriteText(io.Discard, true), "nil *Timeline")
	_, err := tl.MarshalJSON()
	require.ErrorContains(t, err, "nil *Timeline")
	b, err := json.Marshal(struct{ T *httptrace.Timeline }{})
	require.NoError(t, err)
	require.JSONEq(t, `{"T":null}`, string(b), "encoding/json writes a nil pointer as null")
	require.Empty(t, tl.URL())
	require.Zero(t, tl.RawURL())
	require.Nil(t, tl.Clone())
	_, ok := tl.First("done")
	require.False(t, ok)
	_, ok = tl.Last("done")
	require.False(t, ok)
	require.Zero(t, tl.Count("done"))
	require.Zero(t, tl.Timings())
	require.Empty(t, tl.Stack())
	require.Empty(t, tl.RedactError(errors.New("x")))

	var c *httptrace.Collector
	c.Observe(&httptrace.Timeline{})
	c.ObserveEvent(&httptrace.Timeline{}, httptrace.Event{Late: true})
	c.Reset()
	require.Nil(t, c.Timelines())
	require.Nil(t, c.Late())
	require.ErrorContains(t, c.WaitN(guardCtx(t), 1), "nil *Collector")
	var nilCtx context.Context
	require.ErrorContains(t, (&httptrace.Collector{}).WaitN(nilCtx, 1), "nil context")
	require.ErrorContains(t, (&httptrace.Collector{}).Wait(guardCtx(t), nil), "nil condition")

	var j *httptrace.JSONLines
	j.Observe(&httptrace.Timeline{})
	require.ErrorContains(t, j.Err(), "nil *JSONLines")

	var tr *httptrace.Transport
	require.Nil(t, tr.Base())
	tr.CloseIdleConnections()
	body := &closedBody{Reader: strings.NewReader("x")}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", body)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorContains(t, err, "nil *Transport")
	require.True(t, body.closed, "a RoundTripper closes the body, even on errors")
	var f httptrace.ObserverFunc
	f.Observe(&httptrace.Timeline{})

	// Observers handed a nil timeline ignore it.
	var out bytes.Buffer
	lines := mustJSONLines(t, &out)
	logged := mustSlog(t, slog.New(slog.NewTextHandler(&out, nil)))
	all := httptrace.Multi(lines, logged, &httptrace.Collector{})
	for _, o := range []httptrace.Observer{lines, logged, all, &httptrace.Collector{}} {
		o.Observe(nil)
		if e, ok := o.(httptrace.EventObserver); ok {
			e.ObserveEvent(nil, httptrace.Event{Kind: "body-held"})
		}
	}
	require.Empty(t, out.String())
	require.NoError(t, lines.Err())
}

// closedBody is a request body that records its Close.
type closedBody struct {
	io.Reader
	closed bool
}

func (b *closedBody) Close() error {
	b.closed = true
	return nil
}
