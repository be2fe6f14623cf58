package retry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	fixed := Policy{Delay: 100 * ms}
	require.Equal(t, 100*ms, fixed.delay(1, 0.9))
	require.Equal(t, 100*ms, fixed.delay(7, 0.9))

	exp := Policy{Delay: 100 * ms, Backoff: &Backoff{Max: time.Second}} // Multiplier 0 means 2
	var got []time.Duration
	for k := 1; k <= 6; k++ {
		got = append(got, exp.delay(k, 0.5))
	}
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms}, got)

	jit := Policy{Delay: 100 * ms, Backoff: &Backoff{Multiplier: 3, Max: time.Second, Jitter: 0.5}}
	require.Equal(t, 300*ms, jit.delay(2, 0), "u=0: no reduction")
	require.Equal(t, 225*ms, jit.delay(2, 0.5), "u=0.5: a quarter off with Jitter 0.5")
	require.Equal(t, time.Second, jit.delay(5, 0), "capped")
	require.Equal(t, 750*ms, jit.delay(5, 0.5), "cap applies before jitter")
	require.Equal(t, 500*ms, (Policy{Delay: 100 * ms, Backoff: &Backoff{Max: time.Second, Jitter: 1}}).delay(9, 0.5))

	huge := Policy{Delay: time.Hour, Backoff: &Backoff{Multiplier: 10}}
	require.Positive(t, huge.delay(1000, 0), "no overflow without a cap")
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := func(code int, v string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if v != "" {
			r.Header.Set("Retry-After", v)
		}
		return r
	}
	for _, tc := range []struct {
		code int
		v    string
		want time.Duration
		ok   bool
	}{
		{503, "7", 7 * time.Second, true},
		{429, " 7 ", 7 * time.Second, true},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{503, now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{503, "99999999999999999999", 0, false},
		{503, "9223372036854775807", 1<<63 - 1, true},
		{503, "-1", 0, false},
		{503, "1.5", 0, false},
		{503, "", 0, false},
		{500, "7", 0, false},
	} {
		d, ok := retryAfter(resp(tc.code, tc.v), now)
		require.Equal(t, tc.ok, ok, "%d %q", tc.code, tc.v)
		require.Equal(t, tc.want, d, "%d %q", tc.code, tc.v)
	}
	d, ok := retryAfter(nil, now)
	require.False(t, ok)
	require.Zero(t, d)
}

func TestMayReplay(t *testing.T) {
	req := func(method, key string) *http.Request {
		r, err := http.NewRequest(method, "http://localhost/", nil)
		require.NoError(t, err)
		if key != "" {
			r.Header.Set("X-Idempotency-Key", key)
		}
		return r
	}
	require.True(t, Policy{}.mayReplay(req("GET", "")))
	require.True(t, Policy{}.mayReplay(req("HEAD", "")))
	require.False(t, Policy{}.mayReplay(req("OPTIONS", "")))
	require.True(t, Policy{RetryIdempotentMethods: true}.mayReplay(req("OPTIONS", "")))
	require.True(t, Policy{RetryIdempotencyKey: true}.mayReplay(req("POST", "k")))
	empty := req("POST", "")
	empty.Header["Idempotency-Key"] = nil // net/http's "replayable, send nothing": no key for the server
	require.False(t, Policy{RetryIdempotencyKey: true}.mayReplay(empty))
	require.True(t, Policy{UnsafeRetryNonIdempotent: true}.mayReplay(req("CONNECT", "")))
}

type rwc struct {
	*strings.Reader
	written strings.Builder
}

func (b *rwc) Write(p []byte) (int, error) { return b.written.Write(p) }
func (b *rwc) Close() error                { return nil }

func TestKeepAlive(t *testing.T) {
	ended := 0
	end := func() { ended++ }

	resp := &http.Response{Body: http.NoBody}
	keepAlive(resp, end)
	require.Equal(t, 1, ended, "a body-less response ends its attempt at once")
	require.Equal(t, http.NoBody, resp.Body)

	ended = 0
	resp = &http.Response{Body: io.NopCloser(strings.NewReader("ok"))}
	keepAlive(resp, end)
	require.Zero(t, ended, "the attempt lives while the body is unread")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	require.NotZero(t, ended, "EOF ends the attempt")
	require.NoError(t, resp.Body.Close())

	ended = 0
	up := &rwc{Reader: strings.NewReader("")}
	resp = &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: up}
	keepAlive(resp, end)
	w, ok := resp.Body.(io.Writer)
	require.True(t, ok, "a 101 body stays writable")
	_, err = io.WriteString(w, "ping")
	require.NoError(t, err)
	require.Equal(t, "ping", up.written.String())
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 1, ended)
}

// A delay whose timer and budget are both over when the goroutine runs
// again (a loaded machine schedules it late) never lets another attempt
// start: select picks either, so the budget is looked at again.
func TestSleepNeverOutlivesItsBudget(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 1000 {
		if sleep(ctx, time.Nanosecond) {
			t.Fatalf("run %d: sleep reported a budget that had run out as alive", i)
		}
	}
}
