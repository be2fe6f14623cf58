package faultserver_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/faultserver"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// RawHTTP2: the frame-level server, seen by the standard client with
// ForceAttemptHTTP2.

func TestRawH2OK(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/busy", faultserver.Status{Code: 503, Header: http.Header{"Retry-After": {"1"}}})
	c := newClient(t, s, h2)

	resp, body, err := c.get(t, s.URL()+"/ok?q=1")
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, "ok", body)
	require.Equal(t, int64(2), resp.ContentLength)

	resp, _, err = c.get(t, s.URL()+"/busy")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	resp, _, err = c.get(t, s.URL()+"/none")
	require.NoError(t, err)
	require.Equal(t, 404, resp.StatusCode)

	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 3, HandlersEntered: 2}, s.Totals())
}

// A body larger than every initial flow-control window arrives whole.
func TestRawH2LargeBody(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/large", faultserver.LargeBody{Size: 1 << 20})
	c := newClient(t, s, h2)
	for range 2 {
		resp, body, err := c.get(t, s.URL()+"/large")
		require.NoError(t, err)
		require.Equal(t, int64(1<<20), resp.ContentLength)
		require.Len(t, body, 1<<20)
	}
}

// GOAWAY below the request's stream: the client retries on a new
// connection, the caller sees one success, the server two requests.
func TestRawH2GoAwayRetried(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/x", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.GoAway{}, faultserver.OK{}}})
	c := newClient(t, s, h2)

	resp, body, err := c.get(t, s.URL()+"/x")
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, "ok", body)
	require.Equal(t, faultserver.Counters{ConnsAccepted: 2, RequestsRead: 2, HandlersEntered: 2}, s.Counters("/x"))
	require.Equal(t, int64(2), c.dials.Load())
}

// GOAWAY names the last stream before the request's as processed: a
// request on stream 3 of a connection whose stream 1 was served is retried
// (unprocessed), not failed.
func TestRawH2GoAwayBelowTheRequestsStream(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/ok", faultserver.OK{})
	s.Handle("/x", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.GoAway{}, faultserver.OK{}}})
	c := newClient(t, s, h2)

	_, body, err := c.get(t, s.URL()+"/ok") // stream 1
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	_, body, err = c.get(t, s.URL()+"/x") // stream 3: GOAWAY, last stream 1
	require.NoError(t, err, "stream 3 is unprocessed below the GOAWAY's last stream, so it is retried")
	require.Equal(t, "ok", body)
	require.Equal(t, int64(2), s.Counters("/x").RequestsRead)
	require.Equal(t, int64(2), c.dials.Load())
}

func TestRawH2RSTStream(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/internal", faultserver.RSTStream{Code: uint32(http2.ErrCodeInternal)})
	s.Handle("/refused", faultserver.Sequence{Faults: []faultserver.Fault{
		faultserver.RSTStream{Code: uint32(http2.ErrCodeRefusedStream)}, faultserver.OK{},
	}})
	s.Handle("/reset", faultserver.Reset{})
	c := newClient(t, s, h2)

	_, _, err := c.get(t, s.URL()+"/internal")
	require.ErrorContains(t, err, "stream error: stream ID 1; INTERNAL_ERROR; received from peer")
	_, _, err = c.get(t, s.URL()+"/reset")
	require.ErrorContains(t, err, "INTERNAL_ERROR")

	_, body, err := c.get(t, s.URL()+"/refused")
	require.NoError(t, err, "REFUSED_STREAM is retried")
	require.Equal(t, "ok", body)
	require.Equal(t, int64(2), s.Counters("/refused").RequestsRead)
	require.Equal(t, int64(1), s.Totals().ConnsAccepted, "stream errors keep the connection")
}

func TestRawH2HangCancel(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/hang", faultserver.Hang{})
	s.Handle("/ok", faultserver.OK{})
	c := newClient(t, s, h2)

	cancelHanging(t, s, c) // on HTTP/2, the client's RST_STREAM(CANCEL)
	require.Equal(t, int64(1), s.Counters("/hang").CancelsObserved)

	_, body, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, int64(1), s.Totals().ConnsAccepted)
}

func TestRawH2CloseReportsWhatItCut(t *testing.T) {
	s, err := faultserver.New(faultserver.RawHTTP2())
	require.NoError(t, err)
	s.Handle("/hang", faultserver.Hang{})
	c := newClient(t, s, h2)

	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := c.get(t, s.URL()+"/hang")
			errc <- err
		}()
	}
	<-s.Entered("/hang")
	<-s.Entered("/hang")
	err = s.Close()
	var ce *faultserver.CloseError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, faultserver.CloseError{ActiveConns: 1, RunningHandlers: 2}, *ce, "two streams on one connection")
	require.Error(t, <-errc)
	require.Error(t, <-errc)
	require.Equal(t, int64(0), s.Counters("/hang").CancelsObserved)
}

func TestRawH2ConnectionFaults(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/close", faultserver.CloseBeforeResponse{})
	s.Handle("/short", faultserver.CloseMidBody{Length: 100, Send: 10})
	s.Handle("/cc", faultserver.ConnectionClose{})
	c := newClient(t, s, h2)

	_, _, err := c.get(t, s.URL()+"/close")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	resp, body, err := c.get(t, s.URL()+"/short")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, int64(100), resp.ContentLength)
	require.Len(t, body, 10)

	for range 2 {
		_, body, err = c.get(t, s.URL()+"/cc")
		require.NoError(t, err)
		require.Equal(t, "ok", body)
	}
	require.Equal(t, int64(4), s.Totals().ConnsAccepted, "each fault ends its connection")
}

func TestRawH2StallMidBody(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/stall", faultserver.StallMidBody{Length: 100, Send: 10})
	c := newClient(t, s, h2)

	resp, err := c.Get(s.URL() + "/stall")
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	awaitCancel(t, s, "/stall")
	require.Equal(t, faultserver.Counters{ConnsAccepted: 1, RequestsRead: 1, HandlersEntered: 1, CancelsObserved: 1}, s.Counters("/stall"))
}

func TestRawH2CloseBeforeResponseAfterAndWrite(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/x", faultserver.CloseBeforeResponse{After: 1})
	s.Handle("/pay", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.Write{Status: 503}, faultserver.Write{}}})
	c := newClient(t, s, h2)

	for _, code := range []int{503, 200} {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/pay", http.NoBody)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k")
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, code, resp.StatusCode)
	}
	require.Equal(t, int64(1), s.Counters("/pay").WritesCommitted)

	_, _, err := c.get(t, s.URL()+"/x")
	require.NoError(t, err)
	_, _, err = c.get(t, s.URL()+"/x")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "HTTP/2 does not retry a lost connection")
	require.Equal(t, int64(2), s.Counters("/x").RequestsRead)
}

func TestRawH2HandleRejects(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	require.Panics(t, func() { s.Handle("/t", faultserver.Trickle{Bytes: 1}) })
	require.Panics(t, func() {
		s.Handle("/t", faultserver.Sequence{Faults: []faultserver.Fault{faultserver.OK{}, faultserver.Trickle{}}})
	})
	require.NotPanics(t, func() { s.Handle("/g", faultserver.GoAway{Code: uint32(http2.ErrCodeEnhanceYourCalm)}) })
}

func TestRawH2CloseClientConnections(t *testing.T) {
	s := start(t, faultserver.RawHTTP2())
	s.Handle("/hang", faultserver.Hang{})
	s.Handle("/ok", faultserver.OK{})
	c := newClient(t, s, h2)

	errc := make(chan error, 1)
	go func() {
		_, _, err := c.get(t, s.URL()+"/hang")
		errc <- err
	}()
	<-s.Entered("/hang")
	s.CloseClientConnections()
	require.Error(t, <-errc)
	require.Equal(t, int64(0), s.Counters("/hang").CancelsObserved, "the server cutting is not a cancellation")

	_, body, err := c.get(t, s.URL()+"/ok")
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, int64(2), s.Totals().ConnsAccepted)
}
