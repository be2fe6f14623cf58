package pool_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
)

// transportSettings are the fields of an http.Transport a caller sets, in
// a comparable form: funcs by code pointer and nil-ness.
type transportSettings struct {
	DialContext, Dial, DialTLSContext, Proxy      uintptr
	MaxConnsPerHost, MaxIdleConns, MaxIdleConnsPH int
	IdleConnTimeout, TLSHandshakeTimeout          time.Duration
	ResponseHeaderTimeout, ExpectContinueTimeout  time.Duration
	DisableKeepAlives, DisableCompression         bool
	ForceAttemptHTTP2                             bool
	TLSClientConfig                               *tls.Config
	MaxResponseHeaderBytes                        int64
}

func funcPtr(f any) uintptr {
	v := reflect.ValueOf(f)
	if v.IsNil() {
		return 0
	}
	return v.Pointer()
}

func settingsOf(tr *http.Transport) transportSettings {
	//lint:ignore SA1019 the deprecated field is compared, not used
	dial := tr.Dial
	return transportSettings{
		DialContext: funcPtr(tr.DialContext), Dial: funcPtr(dial),
		DialTLSContext: funcPtr(tr.DialTLSContext), Proxy: funcPtr(tr.Proxy),
		MaxConnsPerHost: tr.MaxConnsPerHost, MaxIdleConns: tr.MaxIdleConns, MaxIdleConnsPH: tr.MaxIdleConnsPerHost,
		IdleConnTimeout: tr.IdleConnTimeout, TLSHandshakeTimeout: tr.TLSHandshakeTimeout,
		ResponseHeaderTimeout: tr.ResponseHeaderTimeout, ExpectContinueTimeout: tr.ExpectContinueTimeout,
		DisableKeepAlives: tr.DisableKeepAlives, DisableCompression: tr.DisableCompression,
		ForceAttemptHTTP2: tr.ForceAttemptHTTP2, TLSClientConfig: tr.TLSClientConfig,
		MaxResponseHeaderBytes: tr.MaxResponseHeaderBytes,
	}
}

func TestTrackLeavesBaseUnchanged(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)

	t.Run("caller's dialer", func(t *testing.T) {
		var dials atomic.Int64
		var d net.Dialer
		base := &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			},
			MaxConnsPerHost:       3,
			MaxIdleConnsPerHost:   5,
			IdleConnTimeout:       7 * time.Second,
			ResponseHeaderTimeout: 11 * time.Second,
			TLSHandshakeTimeout:   13 * time.Second,
			DisableCompression:    true,
		}
		defer base.CloseIdleConnections()
		before := settingsOf(base)

		p, err := pool.Track(base, pool.MaxConnsPerHost(1), pool.IdleConnTimeout(time.Second))
		require.NoError(t, err)
		t.Cleanup(p.Close)
		require.Equal(t, before, settingsOf(base), "Track changed the caller's transport")

		// The clone keeps the caller's settings except where an option
		// overrides them, and wraps a dialer of its own.
		tr := p.Transport()
		require.NotSame(t, base, tr)
		require.Equal(t, 1, tr.MaxConnsPerHost)
		require.Equal(t, 1, p.MaxConnsPerHost())
		require.Equal(t, time.Second, tr.IdleConnTimeout)
		require.Equal(t, 5, tr.MaxIdleConnsPerHost)
		require.Equal(t, 11*time.Second, tr.ResponseHeaderTimeout)
		require.Equal(t, 13*time.Second, tr.TLSHandshakeTimeout)
		require.True(t, tr.DisableCompression)
		require.NotEqual(t, before.DialContext, funcPtr(tr.DialContext), "the clone's dialer is wrapped")

		for range 3 {
			require.Equal(t, "ok", get(t, p, srv.URL))
		}
		quiesce(t, p)
		require.EqualValues(t, 1, p.Stats().Dials)
		require.EqualValues(t, 1, dials.Load(), "the pool dials through the caller's dialer")
		require.Equal(t, before, settingsOf(base))

		// The caller's transport is still its own: its requests dial
		// through the same dialer but are neither pooled with nor counted
		// by the pool.
		resp, err := (&http.Client{Transport: base}).Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.EqualValues(t, 2, dials.Load())
		require.EqualValues(t, 1, p.Stats().Dials)
		require.EqualValues(t, 3, p.Stats().Requests)
	})

	t.Run("no dialer", func(t *testing.T) {
		base := &http.Transport{MaxConnsPerHost: 2}
		defer base.CloseIdleConnections()
		before := settingsOf(base)
		p, err := pool.Track(base)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		// http.Transport.Clone runs base's HTTP/2 set-up, as its first
		// request would: that fills in a TLS config offering h2, and
		// nothing else.
		require.NotNil(t, base.TLSClientConfig)
		require.Equal(t, []string{"h2", "http/1.1"}, base.TLSClientConfig.NextProtos)
		require.True(t, reflect.DeepEqual(&tls.Config{NextProtos: []string{"h2", "http/1.1"}}, base.TLSClientConfig))
		before.TLSClientConfig = base.TLSClientConfig
		require.Equal(t, before, settingsOf(base))
		require.Nil(t, base.DialContext)
		require.Equal(t, 2, p.Transport().MaxConnsPerHost)
		require.Zero(t, p.Transport().IdleConnTimeout, "no bound stays no bound")

		require.Equal(t, "ok", get(t, p, srv.URL))
		quiesce(t, p)
		require.EqualValues(t, 1, p.Stats().Dials)
		require.Equal(t, before, settingsOf(base))

		resp, err := (&http.Client{Transport: base}).Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.EqualValues(t, 1, p.Stats().Dials, "the caller's own requests are not tracked")
	})

	t.Run("errors", func(t *testing.T) {
		_, err := pool.Track(nil)
		require.Error(t, err)
		_, err = pool.Track(&http.Transport{}, pool.MaxConnsPerHost(-1))
		require.Error(t, err)
		_, err = pool.Track(&http.Transport{}, nil)
		require.Error(t, err)
	})
}

// TestNewDefaults: New's transport has http.DefaultTransport's settings
// (a service's), is a fresh one, and leaves http.DefaultTransport as it
// was.
func TestNewDefaults(t *testing.T) {
	def := http.DefaultTransport.(*http.Transport)
	before := fmt.Sprintf("%p %v %v", def.TLSClientConfig, def.TLSNextProto == nil, def.Protocols)
	p, err := pool.New()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	tr := p.Transport()
	require.Zero(t, tr.MaxConnsPerHost, "no cap per host")
	require.Equal(t, def.MaxIdleConns, tr.MaxIdleConns)
	require.Equal(t, def.MaxIdleConnsPerHost, tr.MaxIdleConnsPerHost)
	require.NotNil(t, tr.Proxy, "a proxy from the environment")
	require.True(t, tr.ForceAttemptHTTP2)
	require.Equal(t, def.TLSHandshakeTimeout, tr.TLSHandshakeTimeout)
	require.Equal(t, def.IdleConnTimeout, tr.IdleConnTimeout)
	require.Equal(t, def.ExpectContinueTimeout, tr.ExpectContinueTimeout)
	require.EqualValues(t, 1<<20, tr.MaxResponseHeaderBytes)
	require.Equal(t, before, fmt.Sprintf("%p %v %v", def.TLSClientConfig, def.TLSNextProto == nil, def.Protocols),
		"http.DefaultTransport untouched")
	require.NotSame(t, http.DefaultTransport, tr)
	require.Same(t, p.RoundTripper(), p.Client().Transport)
	require.Zero(t, p.Client().Timeout)

	for _, bad := range []pool.Option{
		pool.MaxConnsPerHost(-1), pool.MaxIdleConnsPerHost(-1), pool.ConnectTimeout(-1),
		pool.TLSHandshakeTimeout(-1), pool.ResponseHeaderTimeout(-1), pool.IdleConnTimeout(-1),
		pool.BodyIdleTimeout(-1), pool.TLSClientConfig(nil), pool.WithObserver(nil), pool.UnclosedBodyWarning(-1), pool.Protocols(http.Protocols{}),
		pool.KeepClosed(-1), nil,
	} {
		_, err := pool.New(bad)
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "pool: "), "%v", err)
	}
	// The tracer's options are its own, passed through: a bad one is the
	// tracer's error, in the pool's voice.
	_, err = pool.New(pool.BodyIdleTimeout(-time.Second))
	require.EqualError(t, err, "pool: httptrace: BodyIdleTimeout -1s is negative")
}

// TestTrackHTTP2On: HTTP2(true) turns HTTP/2 on for a tracked transport
// whose TLS configuration (the pool's or its own) turned net/http's
// automatic HTTP/2 off, or that turned it off itself.
func TestTrackHTTP2On(t *testing.T) {
	srv := newServer(t, tlsHTTP2, okHandler)
	for name, base := range map[string]func() (*http.Transport, []pool.Option){
		"pool TLS config": func() (*http.Transport, []pool.Option) {
			return &http.Transport{}, []pool.Option{pool.TLSClientConfig(srv.trust())}
		},
		"own TLS config": func() (*http.Transport, []pool.Option) {
			return &http.Transport{TLSClientConfig: srv.trust()}, nil
		},
		"HTTP/2 turned off": func() (*http.Transport, []pool.Option) {
			return &http.Transport{TLSClientConfig: srv.trust(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr, opts := base()
			col := &httptrace.Collector{}
			p, err := pool.Track(tr, append(opts, pool.Protocols(protocols(true)), pool.WithObserver(col))...)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			require.Equal(t, "ok", get(t, p, srv.URL))
			quiesce(t, p)
			tlines := col.Timelines()
			require.Len(t, tlines, 1)
			require.Equal(t, "HTTP/2.0", tlines[0].Proto)
		})
	}
}

// TestObserversAdd: each WithObserver adds an observer beside the pool's
// own: both see every request, and the pool still counts it.
func TestObserversAdd(t *testing.T) {
	srv := newServer(t, plainHTTP, okHandler)
	a, b := &httptrace.Collector{}, &httptrace.Collector{}
	p := newPool(t, pool.WithObserver(a), pool.WithObserver(b))
	require.Equal(t, "ok", get(t, p, srv.URL))
	require.Equal(t, "ok", get(t, p, srv.URL))
	quiesce(t, p)
	require.Len(t, a.Timelines(), 2)
	require.Len(t, b.Timelines(), 2)
	require.EqualValues(t, 2, p.Stats().Requests)
}
