package retry

import (
	"context"
	"io"
	"net/http"
	"time"
)

const (
	// drainLimit bounds how much of a discarded response body is read so
	// that its connection can be reused; a longer body is closed unread,
	// which closes its connection instead.
	drainLimit = 64 << 10
	// drainTimeout bounds how long draining a discarded body may take.
	drainTimeout = time.Second
)

// discard drains (bounded in size and time) and closes the body of a
// response that is not returned to the caller, then ends its attempt, so
// that no connection stays pinned by it. resp may be nil.
func discard(resp *http.Response, cancel context.CancelFunc) {
	if resp != nil && resp.Body != nil {
		t := time.AfterFunc(drainTimeout, cancel)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		_ = resp.Body.Close()
		t.Stop()
	}
	cancel()
}

// keepAlive hands resp to the caller with its attempt still alive: the
// returned body ends the attempt (calls cancel) when it is closed or read to
// EOF. A body-less response ends the attempt at once.
func keepAlive(resp *http.Response, cancel context.CancelFunc) {
	if resp.Body == nil || resp.Body == http.NoBody {
		cancel()
		return
	}
	cb := cancelBody{rc: resp.Body, cancel: cancel}
	if w, ok := resp.Body.(io.Writer); ok {
		// A 101 Switching Protocols body is writable; keep it so.
		resp.Body = &cancelBodyWriter{cancelBody: cb, w: w}
		return
	}
	resp.Body = &cb
}

// cancelBody ends an attempt's context when the body is done with. Read and
// Close may be called from different goroutines, as for any response body.
type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		// The connection was released before Read returned EOF.
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

type cancelBodyWriter struct {
	cancelBody
	w io.Writer
}

func (b *cancelBodyWriter) Write(p []byte) (int, error) { return b.w.Write(p) }
