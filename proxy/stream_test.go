package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/require"
)

// streamSize is the body the streaming tests send through the proxy, and
// aheadLimit how far its producer may get ahead of its consumer: above
// the socket buffers of two loopback hops (a receive buffer may grow to
// 32 MiB), a quarter of the body. A proxy
// that buffered a body whole would let the producer run a whole body
// ahead.
const (
	streamSize = 256 << 20
	aheadLimit = 64 << 20
)

// producer is a body of n bytes that fails once it is more than
// aheadLimit ahead of what consumed says was read at the far end.
type producer struct {
	n, made  int64
	consumed *atomic.Int64
	maxAhead int64
}

var errAhead = errors.New("producer ran ahead of the consumer: the body is being buffered")

func (p *producer) Read(b []byte) (int, error) {
	if p.made >= p.n {
		return 0, io.EOF
	}
	ahead := p.made - p.consumed.Load()
	p.maxAhead = max(p.maxAhead, ahead)
	if ahead > aheadLimit {
		return 0, fmt.Errorf("%w (%d bytes ahead)", errAhead, ahead)
	}
	n := int64(len(b))
	n = min(n, p.n-p.made)
	clear(b[:n])
	p.made += n
	return int(n), nil
}

func (p *producer) Close() error { return nil }

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// An upload streams through the proxy: the client never gets more than
// aheadLimit ahead of what the upstream has read.
func TestUploadStreams(t *testing.T) {
	var consumed atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, countingReader{r.Body, &consumed})
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	p := start(t, up.URL)
	c := newGoClient(t, nil)
	body := &producer{n: streamSize, consumed: &consumed}
	req, err := http.NewRequestWithContext(t.Context(), "PUT", p.URL()+"/upload", body)
	require.NoError(t, err)
	req.ContentLength = streamSize
	resp, err := c.Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(streamSize), string(got))
	t.Logf("the client was at most %d KiB ahead of the upstream", body.maxAhead>>10)
}

// A download streams through the proxy: the upstream never gets more than
// aheadLimit ahead of what the client has read.
func TestDownloadStreams(t *testing.T) {
	var consumed atomic.Int64
	ahead := make(chan int64, 1) // the handler's, once it returns
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body := &producer{n: streamSize, consumed: &consumed}
		w.Header().Set("Content-Length", strconv.Itoa(streamSize))
		_, _ = io.Copy(w, body)
		ahead <- body.maxAhead
	})
	p := start(t, up.URL)
	c := newGoClient(t, nil)
	req, err := http.NewRequestWithContext(t.Context(), "GET", p.URL()+"/download", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, countingReader{resp.Body, &consumed})
	resp.Body.Close()
	require.NoError(t, err)
	require.EqualValues(t, streamSize, n)
	select {
	case maxAhead := <-ahead:
		t.Logf("the upstream was at most %d KiB ahead of the client", maxAhead>>10)
	case <-testkit.Bounded(t).Done():
		t.Fatal("the upstream's handler did not return")
	}
}
