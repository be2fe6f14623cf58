package pool

import (
	"fmt"
	"maps"
	"time"

	"github.com/connaudit/connaudit/internal/hook"
	"github.com/connaudit/connaudit/internal/vocab"
)

// counters are the live numbers of a host or of the whole pool; guarded
// by Pool.mu.
type counters struct {
	open, active, idle, dialing, waiting, inFlight, openBodies, maxOpen, doomed int
	dials, dialErrors, closed, byClient, byServer, requests, reused             int64
	waitCount, retries, retriesPossibly                                         int64
	waitDuration                                                                time.Duration
	closedBy                                                                    map[CloseReason]int64
	waits, setups                                                               histogram
	inFlightBy                                                                  [len(methods)]int
	methodsUsed                                                                 uint16      // a bit per index of methods
	scheme                                                                      string      // a host's: of its latest request
	maxInFlight                                                                 int         // the most requests in flight at once
	churn                                                                       churnWindow // a host's: its closes for a full idle pool
}

// peaks are the pool-wide numbers that its hosts' counters do not add up
// to: the most connections open at once (of those open, the doomed do not
// count) and the most requests in flight at once, and what they are the
// peaks of. Every other total is the sum of the hosts' counters, made when
// it is read (totalsLocked), so that an event, five a request, updates
// one host's counters and not a second set as well. Guarded by Pool.mu.
type peaks struct {
	open, doomed, maxOpen, inFlight, maxInFlight int
}

// totalsLocked returns the pool's totals: its hosts' numbers added up, and
// its own peak of open connections. A pool of one host (a probe's, say,
// which reads them after every request) has that host's, at no more cost
// than reading them.
func (p *Pool) totalsLocked() Stats {
	var s Stats
	if len(p.hosts) == 1 {
		for _, h := range p.hosts {
			s = h.stats()
		}
		s.Scheme = ""
		if len(s.ClosedBy) == 0 {
			s.ClosedBy = nil // as a sum of hosts has it
		}
	} else {
		for _, h := range p.hosts {
			s.Add(h.stats())
		}
	}
	s.MaxOpen = p.peaks.maxOpen
	return s
}

// sumLocked returns the sum over the hosts of what f reads of each.
func (p *Pool) sumLocked(f func(h *counters) int) int {
	n := 0
	for _, h := range p.hosts {
		n += f(h)
	}
	return n
}

func (c *counters) count(by Closer, reason CloseReason) {
	if c.closedBy == nil {
		c.closedBy = map[CloseReason]int64{}
	}
	c.closed++
	c.closedBy[reason]++
	if by == vocab.ClosedByServer {
		c.byServer++
	} else {
		c.byClient++
	}
}

func (c *counters) uncount(by Closer, reason CloseReason) {
	c.closed--
	c.closedBy[reason]--
	if c.closedBy[reason] == 0 {
		delete(c.closedBy, reason)
	}
	if by == vocab.ClosedByServer {
		c.byServer--
	} else {
		c.byClient--
	}
}

// Stats are a pool's numbers at one instant, per host or in total, in the
// spirit of sql.DBStats.
type Stats struct {
	// Open connections: TCP (and TLS, if any) up and not yet closed.
	Open int `json:"open"`
	// Active connections serve at least one request.
	Active int `json:"active"`
	// Idle connections serve none.
	Idle int `json:"idle"`
	// Dialing counts dials (TCP connect and TLS handshake) in progress.
	Dialing int `json:"dialing"`
	// Dials counts every dial started; DialErrors those that failed.
	Dials      int64 `json:"dials"`
	DialErrors int64 `json:"dial_errors"`
	// Closed counts connections closed; ClosedBy splits them by reason,
	// ClosedByClient and ClosedByServer by side.
	Closed         int64                 `json:"closed"`
	ClosedBy       map[CloseReason]int64 `json:"closed_by,omitempty"`
	ClosedByClient int64                 `json:"closed_by_client"`
	ClosedByServer int64                 `json:"closed_by_server"`
	// Requests counts requests, each once however many times the
	// Transport sent it, and those that ended before asking for a
	// connection; ReusedRequests those served (their last attempt) by a
	// connection that had served a request before.
	Requests       int64 `json:"requests"`
	ReusedRequests int64 `json:"reused_requests"`
	// InFlight counts requests not finished (their body not closed).
	InFlight int `json:"in_flight"`
	// OpenBodies counts response bodies handed out and not closed.
	OpenBodies int `json:"open_bodies"`
	// Waiting counts requests waiting for a connection now; WaitCount
	// those that ever waited, that is, were not served at once by an idle
	// connection (nor, over HTTP/2, by a connection already open): for a
	// dial, their own or another's, or for a connection in use; and
	// WaitDuration their total wait, dials included. (A timeline's
	// Timings.PoolWait leaves out the request's own dial.)
	Waiting      int           `json:"waiting"`
	WaitCount    int64         `json:"wait_count"`
	WaitDuration time.Duration `json:"wait_duration_ns"`
	// MaxOpen is the largest number of connections open at once.
	MaxOpen int `json:"max_open"`

	// Waits counts each wait that WaitDuration sums up by its length:
	// Waits.Sum is WaitDuration, and Waits.Count is WaitCount plus the
	// waits of requests the Transport sent again. Setups counts the
	// connections established by how long each took to set up, from the
	// start of its dial to its TLS handshake done, if any (DNS, connect,
	// handshake).
	Waits  Histogram `json:"waits"`
	Setups Histogram `json:"setups"`
	// InFlightByMethod splits InFlight by request method: GET, HEAD,
	// POST, PUT, DELETE, CONNECT, OPTIONS, TRACE and PATCH by name, any
	// other as "_OTHER" (as the OpenTelemetry conventions name it), so
	// that a method made up per request adds no entry. Every method sent
	// to the host (or by the pool) is there, at 0 when none is in flight.
	InFlightByMethod map[string]int `json:"in_flight_by_method,omitempty"`
	// HiddenRetries counts the times the Transport sent a request again on
	// another connection by itself, unseen by the caller
	// ([httptrace.Timeline.Retries]). HiddenRetriesPossiblyProcessed
	// counts those whose attempt before had reached the server over
	// HTTP/1: a byte of it was written on a connection that the server
	// had not closed first, which then failed without a response; the
	// server may have processed the request twice. The rest were not
	// processed: nothing was written, or the server had closed the
	// connection first, or the attempt was an HTTP/2 stream, which
	// net/http sends again only when the server refused it (a GOAWAY,
	// REFUSED_STREAM) or reset it with PROTOCOL_ERROR. The pool cannot
	// tell the stale-connection race (a server closing a connection idle
	// past its timeout as a request goes out on it) from a failure after
	// processing: it counts as possibly processed; connaudit probe tells
	// the two apart against a host.
	HiddenRetries                  int64 `json:"hidden_retries"`
	HiddenRetriesPossiblyProcessed int64 `json:"hidden_retries_possibly_processed"`
	// Scheme is, in [Pool.HostStats], the URL scheme ("http", "https") of
	// the latest request sent to the host; empty in the totals.
	Scheme string `json:"scheme,omitempty"`
}

// methods are the request methods InFlightByMethod names; methodOther
// stands for every other one.
var methods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", methodOther}

const methodOther = "_OTHER"

// methodIndex returns the index in methods of m, a request's method ("" is
// GET, as net/http reads it).
func methodIndex(m string) uint8 {
	switch m {
	case "GET", "":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "DELETE":
		return 4
	case "CONNECT":
		return 5
	case "OPTIONS":
		return 6
	case "TRACE":
		return 7
	case "PATCH":
		return 8
	}
	return 9
}

func (c *counters) stats() Stats {
	return Stats{
		Open: c.open, Active: c.active, Idle: c.idle, Dialing: c.dialing,
		Dials: c.dials, DialErrors: c.dialErrors, Closed: c.closed, ClosedBy: maps.Clone(c.closedBy),
		ClosedByClient: c.byClient, ClosedByServer: c.byServer,
		Requests: c.requests, ReusedRequests: c.reused, InFlight: c.inFlight, OpenBodies: c.openBodies,
		Waiting: c.waiting, WaitCount: c.waitCount, WaitDuration: c.waitDuration, MaxOpen: c.maxOpen,
		Waits: c.waits.export(), Setups: c.setups.export(), InFlightByMethod: c.inFlightByMethod(),
		HiddenRetries: c.retries, HiddenRetriesPossiblyProcessed: c.retriesPossibly, Scheme: c.scheme,
	}
}

func (c *counters) inFlightByMethod() map[string]int {
	if c.methodsUsed == 0 {
		return nil
	}
	m := make(map[string]int, 1)
	for i, n := range c.inFlightBy {
		if c.methodsUsed&(1<<i) != 0 {
			m[methods[i]] = n
		}
	}
	return m
}

// Check returns an error if the invariants do not hold:
// dials = open + closed + dial errors + dialing, active + idle = open, no
// count is negative, and the splits add up: closes by reason and by side
// to Closed, InFlightByMethod to InFlight, each histogram's buckets to its
// count, Waits.Sum is WaitDuration.
func (s Stats) Check() error {
	if s.Dials != int64(s.Open)+s.Closed+s.DialErrors+int64(s.Dialing) {
		return fmt.Errorf("pool: dials %d != open %d + closed %d + dial errors %d + dialing %d",
			s.Dials, s.Open, s.Closed, s.DialErrors, s.Dialing)
	}
	if s.Active+s.Idle != s.Open {
		return fmt.Errorf("pool: active %d + idle %d != open %d", s.Active, s.Idle, s.Open)
	}
	if s.Open < 0 || s.Active < 0 || s.Idle < 0 || s.Dialing < 0 || s.Waiting < 0 || s.InFlight < 0 || s.OpenBodies < 0 {
		return fmt.Errorf("pool: negative count in %+v", s)
	}
	var by int64
	for _, n := range s.ClosedBy {
		by += n
	}
	if by != s.Closed || s.ClosedByClient+s.ClosedByServer != s.Closed {
		return fmt.Errorf("pool: closed %d but %d by reason, %d by side", s.Closed, by, s.ClosedByClient+s.ClosedByServer)
	}
	var inFlight int
	for _, n := range s.InFlightByMethod {
		inFlight += n
	}
	if inFlight != s.InFlight {
		return fmt.Errorf("pool: in flight %d but %d by method", s.InFlight, inFlight)
	}
	if !s.Waits.check() || !s.Setups.check() || s.Waits.Sum != s.WaitDuration || s.Waits.Count < s.WaitCount {
		return fmt.Errorf("pool: histograms do not add up: waits %+v (count %d, duration %v), setups %+v",
			s.Waits, s.WaitCount, s.WaitDuration, s.Setups)
	}
	if s.HiddenRetriesPossiblyProcessed < 0 || s.HiddenRetriesPossiblyProcessed > s.HiddenRetries {
		return fmt.Errorf("pool: %d hidden retries possibly processed of %d", s.HiddenRetriesPossiblyProcessed, s.HiddenRetries)
	}
	return nil
}

// Add adds the numbers of o to those of s, as a total of several hosts
// (or pools) is made: counts, gauges, durations, the splits by reason,
// side and method and the histograms by their sum; MaxOpen by the larger,
// since the peaks need not have come at once; Scheme is emptied, as in a
// pool's totals. A field added to Stats is added here too
// (TestStatsAddEveryField).
func (s *Stats) Add(o Stats) {
	if s == nil {
		return
	}
	s.Open += o.Open
	s.Active += o.Active
	s.Idle += o.Idle
	s.Dialing += o.Dialing
	s.Dials += o.Dials
	s.DialErrors += o.DialErrors
	s.Closed += o.Closed
	s.ClosedBy = addCounts(s.ClosedBy, o.ClosedBy)
	s.ClosedByClient += o.ClosedByClient
	s.ClosedByServer += o.ClosedByServer
	s.Requests += o.Requests
	s.ReusedRequests += o.ReusedRequests
	s.InFlight += o.InFlight
	s.OpenBodies += o.OpenBodies
	s.Waiting += o.Waiting
	s.WaitCount += o.WaitCount
	s.WaitDuration += o.WaitDuration
	s.MaxOpen = max(s.MaxOpen, o.MaxOpen)
	s.Waits.add(o.Waits)
	s.Setups.add(o.Setups)
	s.InFlightByMethod = addCounts(s.InFlightByMethod, o.InFlightByMethod)
	s.HiddenRetries += o.HiddenRetries
	s.HiddenRetriesPossiblyProcessed += o.HiddenRetriesPossiblyProcessed
	s.Scheme = ""
}

// addCounts adds the counts of o to those of m, which it returns (made if
// nil and o has any).
func addCounts[K comparable, N int | int64](m, o map[K]N) map[K]N {
	if len(o) > 0 && m == nil {
		m = make(map[K]N, len(o))
	}
	for k, n := range o {
		m[k] += n
	}
	return m
}

// Stats returns the pool's totals: its hosts' numbers ([Pool.HostStats])
// added up as [Stats.Add] adds them, but for MaxOpen, the most connections
// open at once in the whole pool, at least the largest host's. They are
// added up when read, not kept.
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.totalsLocked()
}

// HostStats returns the numbers of each host ("host:port" as dialed).
func (p *Pool) HostStats() map[string]Stats {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hostStatsLocked()
}

func (p *Pool) hostStatsLocked() map[string]Stats {
	m := make(map[string]Stats, len(p.hosts))
	for k, h := range p.hosts {
		m[k] = h.stats()
	}
	return m
}

// Conns returns a snapshot of the connections: those open or dialing, then
// the most recently closed ones (see [KeepClosed]), in id order.
func (p *Pool) Conns() []Conn {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connsLocked()
}

func (p *Pool) connsLocked() []Conn {
	out := make([]Conn, 0, len(p.conns)+len(p.closed))
	seen := map[uint64]bool{}
	for _, c := range p.closed {
		out = append(out, c.snapshot())
		seen[c.ID] = true
	}
	for _, c := range p.conns {
		if !seen[c.ID] {
			out = append(out, c.snapshot())
		}
	}
	sortConns(out)
	return out
}

// Conn returns a snapshot of connection id, if the pool still knows it.
func (p *Pool) Conn(id uint64) (Conn, bool) {
	if p == nil {
		return Conn{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.knownLocked(id); c != nil {
		return c.snapshot(), true
	}
	return Conn{}, false
}

// knownLocked returns connection id, open, dialing or among the closed
// ones the pool remembers, or nil.
func (p *Pool) knownLocked(id uint64) *connState {
	if c := p.conns[id]; c != nil {
		return c
	}
	for _, c := range p.closed {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (c *connState) snapshot() Conn {
	s := c.Conn
	s.BytesRead = c.io.read.Load()
	s.BytesWritten = c.io.written.Load()
	s.History = append([]StateChange(nil), c.History...)
	s.RequestIDs = append([]uint64(nil), c.RequestIDs...)
	s.Active = nil
	for id := range c.active.all() {
		if c.State == vocab.StateActive {
			s.Active = append(s.Active, id)
		}
	}
	sortIDs(s.Active)
	return s
}

func init() {
	hook.LastAttempt = func(p any, id uint64) (hook.ConnAttempt, bool) { return p.(*Pool).lastAttempt(id) }
	hook.Bounds = func(p any) hook.PoolBounds {
		cfg := p.(*Pool).cfg
		b := hook.PoolBounds{BodyIdle: hook.Settings(p.(*Pool).traced).BodyIdle}
		if d := cfg.connectTimeout; d != nil {
			b.Connect, b.ConnectSet = *d, true
		}
		return b
	}
}

// lastAttempt returns what p saw of the last request handed connection id.
func (p *Pool) lastAttempt(id uint64) (hook.ConnAttempt, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.knownLocked(id)
	if c == nil {
		return hook.ConnAttempt{}, false
	}
	return c.attempt(), true
}

// attempt returns what the pool saw of the last request handed c; p.mu
// is held.
func (c *connState) attempt() hook.ConnAttempt {
	if c.h2 {
		return hook.ConnAttempt{H2: true}
	}
	a := hook.ConnAttempt{Wrote: c.io.written.Load() > c.writtenAtGot}
	if _, ok := serverSide(c.readErr); ok {
		a.ServerClosed = true
		a.ClosedFirst = c.writesAtReadErr == c.writesAtGot
	}
	if c.gotIdle {
		a.Idle = c.gotAt.time().Sub(c.idleAtGot.time())
	}
	return a
}
