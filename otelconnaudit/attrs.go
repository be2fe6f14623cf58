package otelconnaudit

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// setKind says which instrument an attribute set is for: each takes its
// own attributes from the same request.
type setKind uint8

const (
	setDuration    setKind = iota // http.client.request.duration
	setQueue                      // http.client.request.time_in_queue
	setRetries                    // connaudit.request.hidden_retries
	setConnDuraton                // http.client.connection.duration, connaudit.connection.setup.duration
)

// setKey is what an attribute set is made from: strings as the request
// gives them, compared without building anything.
type setKey struct {
	kind   setKind
	method string
	scheme string
	host   string // host or host:port
	proto  string // "HTTP/1.1", "HTTP/2.0", "h2"…
	status int
	errTyp string
}

// measureOpts are the options of one attribute set, built once.
type measureOpts struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

// maxSets bounds the attribute sets kept. A service reaches a bounded set
// of hosts with a bounded set of methods and statuses; past the bound
// (hosts made up per request, say) sets are built for each measurement,
// which allocates but keeps memory bounded.
const maxSets = 1024

// setCache maps keys to their options. Reads take no lock and allocate
// nothing: the map is replaced, never changed, under mu.
type setCache struct {
	m  atomic.Pointer[map[setKey]*measureOpts]
	mu sync.Mutex
}

func (c *setCache) get(k setKey) *measureOpts {
	if m := c.m.Load(); m != nil {
		if o := (*m)[k]; o != nil {
			return o
		}
	}
	set := attribute.NewSet(k.attributes()...)
	o := &measureOpts{
		rec: []metric.RecordOption{metric.WithAttributeSet(set)},
		add: []metric.AddOption{metric.WithAttributeSet(set)},
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxSets {
		return o
	}
	m := make(map[setKey]*measureOpts, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = o
	c.m.Store(&m)
	return o
}

func lenOf(m *map[setKey]*measureOpts) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// attributes returns the attributes of k's set, named as the semantic
// conventions name them.
func (k setKey) attributes() []attribute.KeyValue {
	addr, port := serverAddr(k.scheme, k.host)
	kv := []attribute.KeyValue{semconv.ServerAddressKey.String(addr)}
	if port > 0 {
		kv = append(kv, semconv.ServerPortKey.Int(port))
	}
	if k.kind == setConnDuraton {
		if v := protocolVersion(k.proto); v != "" {
			kv = append(kv, semconv.NetworkProtocolVersionKey.String(v))
		}
		if k.scheme != "" {
			kv = append(kv, semconv.URLSchemeKey.String(k.scheme))
		}
		return kv
	}
	kv = append(kv, semconv.HTTPRequestMethodKey.String(method(k.method)))
	if k.scheme != "" {
		kv = append(kv, semconv.URLSchemeKey.String(k.scheme))
	}
	if k.kind == setRetries {
		return kv
	}
	if v := protocolVersion(k.proto); v != "" {
		kv = append(kv, semconv.NetworkProtocolVersionKey.String(v))
	}
	if k.kind == setQueue {
		return kv
	}
	if k.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCodeKey.Int(k.status))
	}
	if k.errTyp != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(k.errTyp))
	}
	return kv
}

// serverAddr splits host (as in a URL: host, host:port, [v6]:port) into
// server.address and server.port, the port defaulting to the scheme's.
func serverAddr(scheme, host string) (string, int) {
	if h, p, err := net.SplitHostPort(host); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			return h, n
		}
		return h, 0
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch scheme {
	case "http":
		return host, 80
	case "https":
		return host, 443
	}
	return host, 0
}

// method returns m as http.request.method: one of the methods the
// conventions know, or "_OTHER", so that no caller's made-up method adds a
// series.
func method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return m
	case "":
		return "GET"
	}
	return "_OTHER"
}

// protocolVersion returns network.protocol.version for a response's or a
// connection's protocol: "HTTP/1.1" → "1.1", "HTTP/2.0" and "h2" → "2",
// "" when unknown.
func protocolVersion(proto string) string {
	switch proto {
	case "":
		return ""
	case "HTTP/1.1":
		return "1.1"
	case "HTTP/2.0", "h2":
		return "2"
	case "HTTP/1.0":
		return "1.0"
	case "HTTP/3.0", "h3":
		return "3"
	}
	if v, ok := strings.CutPrefix(proto, "HTTP/"); ok {
		return strings.TrimSuffix(v, ".0")
	}
	return ""
}
