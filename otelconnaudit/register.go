package otelconnaudit

import (
	"context"
	"errors"
	"sort"
	"sync"

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
// counted on the request's path for these. A series once reported stays,
// at 0 when nothing is left to count, while p is registered. Unregister
// the registration when p is no longer used.
func (o *Observer) Register(p *pool.Pool) (metric.Registration, error) {
	if p == nil {
		return nil, errors.New("otelconnaudit: nil pool")
	}
	if o.meter == nil {
		return nil, errors.New("otelconnaudit: Register needs a MeterProvider")
	}
	seen := &seenGroups{conns: map[connGroup]bool{}}
	return o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o.observePool(p, obs, seen)
		return nil
	}, o.openConns, o.activeReqs, o.openBodies, o.closes)
}

// connGroup is the attributes of http.client.open_connections but the
// state.
type connGroup struct {
	host, proto, scheme string
}

// maxSeen bounds the groups remembered to be reported at 0: past it, a
// group is reported only while it counts something.
const maxSeen = maxSets

// seenGroups are the connection groups of a pool reported once, which are
// reported at 0 when no connection is left in them, so that a series reads
// 0 rather than vanishing. (The pool's HostStats keep every host, and in
// each every method sent, for the other instruments.) Collections may run
// concurrently (one per reader).
type seenGroups struct {
	mu    sync.Mutex
	conns map[connGroup]bool
}

func (o *Observer) observePool(p *pool.Pool, obs metric.Observer, seen *seenGroups) {
	// Connections by host, protocol, scheme and state. Both states are
	// reported for every group, so that a state with none reads 0.
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
		g := connGroup{c.Host, c.Proto, c.Scheme}
		n := counts[g]
		if n == nil {
			n = new([2]int64)
			counts[g] = n
		}
		n[i]++
	}
	seen.mu.Lock()
	for g := range seen.conns {
		if counts[g] == nil {
			counts[g] = new([2]int64)
		}
	}
	for g := range counts {
		if len(seen.conns) < maxSeen {
			seen.conns[g] = true
		}
	}
	seen.mu.Unlock()

	for g, n := range counts {
		for i, state := range []string{"active", "idle"} {
			kv := serverAttrs(g.host, semconv.HTTPConnectionStateKey.String(state))
			if v := protocolVersion(g.proto); v != "" {
				kv = append(kv, semconv.NetworkProtocolVersionKey.String(v))
			}
			if g.scheme != "" {
				kv = append(kv, semconv.URLSchemeKey.String(g.scheme))
			}
			obs.ObserveInt64(o.openConns, n[i], metric.WithAttributes(kv...))
		}
	}
	hosts := p.HostStats()
	for host, s := range hosts {
		for m, n := range s.InFlightByMethod {
			kv := serverAttrs(host, semconv.HTTPRequestMethodKey.String(method(m)))
			if s.Scheme != "" {
				kv = append(kv, semconv.URLSchemeKey.String(s.Scheme))
			}
			obs.ObserveInt64(o.activeReqs, int64(n), metric.WithAttributes(kv...))
		}
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
