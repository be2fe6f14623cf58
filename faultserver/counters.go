package faultserver

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Counters is a snapshot of what the server observed, per endpoint
// ([Server.Counters]) or for all endpoints ([Server.Totals]).
type Counters struct {
	// ConnsAccepted is, per endpoint, the number of distinct connections
	// that delivered at least one request for the path; in [Server.Totals]
	// it is every TCP connection the server accepted, including those that
	// never sent a request.
	ConnsAccepted int64
	// RequestsRead counts requests read from the wire, including those for
	// a path without a handler (answered 404) and those a fault answers by
	// closing the connection.
	RequestsRead int64
	// HandlersEntered counts requests handed to the path's [Fault]: every
	// request read for a path with a handler, while the server is not
	// closing. Each entry is also signalled on [Server.Entered].
	HandlersEntered int64
	// CancelsObserved counts handlers that saw the client go away while
	// they waited ([Hang], [StallMidBody], [Trickle]). The server cutting a
	// connection itself (Close, CloseClientConnections, a fault) is not a
	// cancellation. Each is also signalled on [Server.CancelObserved].
	CancelsObserved int64
	// WritesCommitted counts side effects the endpoint committed (see
	// [Write], and the Write field of [CloseBeforeResponse] and [Reset]).
	WritesCommitted int64
	// Unread counts requests the server closed a connection on without
	// reading them ([CloseBeforeRead]; a request racing the close of
	// [RequestLimit] without Announce or of [IdleClose]), counted for the
	// path whose fault armed the connection, whatever the request's own
	// path. They are not in RequestsRead.
	Unread int64
	// DarkConns counts the connections that went dark ([GoDark]).
	DarkConns int64
}

// signalCap is the buffer of the Entered and CancelObserved channels.
const signalCap = 1 << 12

// endpoint is the state of one path: its fault, counters and signals.
type endpoint struct {
	entered  chan struct{}
	canceled chan struct{}

	requestsRead    atomic.Int64
	handlersEntered atomic.Int64
	cancels         atomic.Int64
	writes          atomic.Int64
	unread          atomic.Int64
	dark            atomic.Int64

	mu    sync.Mutex
	fault Fault               // nil: answer 404
	seq   int                 // requests served by fault since Handle
	conns map[uint64]struct{} // ids of connections that delivered a request
	keys  map[string]struct{} // idempotency keys seen
	recv  []string            // idempotency keys received, in order (at most signalCap)
}

func newEndpoint() *endpoint {
	return &endpoint{
		entered:  make(chan struct{}, signalCap),
		canceled: make(chan struct{}, signalCap),
		conns:    make(map[uint64]struct{}),
		keys:     make(map[string]struct{}),
	}
}

// read records a request read on conn and returns the fault that serves it,
// with a Sequence resolved to its element, or nil for no handler.
func (ep *endpoint) read(connID uint64) Fault {
	ep.requestsRead.Add(1)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.conns[connID] = struct{}{}
	f := ep.fault
	if seq, ok := f.(Sequence); ok {
		f = seq.Faults[min(ep.seq, len(seq.Faults)-1)]
	}
	if f != nil {
		ep.seq++
	}
	return f
}

func (ep *endpoint) setFault(f Fault) {
	ep.mu.Lock()
	ep.fault, ep.seq = f, 0
	ep.mu.Unlock()
}

// enter counts a handler entry and signals it.
func (ep *endpoint) enter() {
	ep.handlersEntered.Add(1)
	signal(ep.entered)
}

// cancel counts a cancellation the handler observed and signals it.
func (ep *endpoint) cancel() {
	ep.cancels.Add(1)
	signal(ep.canceled)
}

// commitWrite counts a committed write unless h carries an idempotency key
// already seen, and returns the writes committed so far.
func (ep *endpoint) commitWrite(h http.Header) int64 {
	key := h.Get("Idempotency-Key")
	if key == "" {
		key = h.Get("X-Idempotency-Key")
	}
	if key != "" {
		ep.mu.Lock()
		_, seen := ep.keys[key]
		ep.keys[key] = struct{}{}
		if len(ep.recv) < signalCap {
			ep.recv = append(ep.recv, key)
		}
		ep.mu.Unlock()
		if seen {
			return ep.writes.Load()
		}
	}
	return ep.writes.Add(1)
}

func (ep *endpoint) snapshot() Counters {
	ep.mu.Lock()
	conns := int64(len(ep.conns))
	ep.mu.Unlock()
	return Counters{
		ConnsAccepted:   conns,
		RequestsRead:    ep.requestsRead.Load(),
		HandlersEntered: ep.handlersEntered.Load(),
		CancelsObserved: ep.cancels.Load(),
		WritesCommitted: ep.writes.Load(),
		Unread:          ep.unread.Load(),
		DarkConns:       ep.dark.Load(),
	}
}

// signal sends on ch without ever blocking; past signalCap pending values it
// drops the signal (the counters stay exact).
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
