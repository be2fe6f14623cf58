package otelconnaudit

import (
	"context"
	"errors"
	"sort"

	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Attribute keys of connaudit's own metrics.
const (
	closeSideKey   = attribute.Key("connaudit.close.side")
	closeReasonKey = attribute.Key("connaudit.close.reason")
)

// Register makes each collection of the Observer's MeterProvider read p's
// numbers: http.client.open_connections (from [pool.Pool.Conns]),
// http.client.active_requests, connaudit.response.open_bodies and
// connaudit.connection.closes (from [pool.Pool.HostStats]). Nothing is
// counted on the request's path for these. Unregister the registration
// when p is no longer used.
func (o *Observer) Register(p *pool.Pool) (metric.Registration, error) {
	if p == nil {
		return nil, errors.New("otelconnaudit: nil pool")
	}
	if o.meter == nil {
		return nil, errors.New("otelconnaudit: Register needs a MeterProvider")
	}
	return o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o.observePool(p, obs)
		return nil
	}, o.openConns, o.activeReqs, o.openBodies, o.closes)
}

// connGroup is the attributes of http.client.open_connections but the
// state.
type connGroup struct {
	host, proto string
}

func (o *Observer) observePool(p *pool.Pool, obs metric.Observer) {
	// Connections by host, protocol and state. Both states are reported
	// for every group with an open connection, so that a state with none
	// reads 0 rather than vanishing.
	counts := map[connGroup]*[2]int64{} // active, idle
	for _, c := range p.Conns() {
		var i int
		switch c.State {
		case vocab.StateActive:
			i = 0
		case vocab.StateIdle:
			i = 1
		default:
			continue
		}
		g := connGroup{c.Host, c.Proto}
		n := counts[g]
		if n == nil {
			n = new([2]int64)
			counts[g] = n
		}
		n[i]++
	}
	for g, n := range counts {
		for i, state := range []string{"active", "idle"} {
			kv := serverAttrs(g.host, semconv.HTTPConnectionStateKey.String(state))
			if v := protocolVersion(g.proto); v != "" {
				kv = append(kv, semconv.NetworkProtocolVersionKey.String(v))
			}
			obs.ObserveInt64(o.openConns, n[i], metric.WithAttributes(kv...))
		}
	}
	hosts := p.HostStats()
	for host, s := range hosts {
		obs.ObserveInt64(o.activeReqs, int64(s.InFlight), metric.WithAttributes(serverAttrs(host)...))
		obs.ObserveInt64(o.openBodies, int64(s.OpenBodies), metric.WithAttributes(serverAttrs(host)...))
		reasons := make([]string, 0, len(s.ClosedBy))
		for r := range s.ClosedBy {
			reasons = append(reasons, string(r))
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			reason := pool.CloseReason(r)
			obs.ObserveInt64(o.closes, s.ClosedBy[reason], metric.WithAttributes(serverAttrs(host,
				closeSideKey.String(string(vocab.SideOf(reason))),
				closeReasonKey.String(r))...))
		}
	}
}

// serverAttrs returns server.address and server.port of host ("host:port"
// as the pool dials it), then extra.
func serverAttrs(host string, extra ...attribute.KeyValue) []attribute.KeyValue {
	addr, port := serverAddr("", host)
	kv := make([]attribute.KeyValue, 0, 2+len(extra)+1)
	kv = append(kv, semconv.ServerAddressKey.String(addr))
	if port > 0 {
		kv = append(kv, semconv.ServerPortKey.Int(port))
	}
	return append(kv, extra...)
}
