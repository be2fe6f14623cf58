package httptrace

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/connaudit/connaudit/internal/isnil"
)

// timelineJSON is the stable JSON form of a [Timeline] (see
// [Timeline.MarshalJSON]).
type timelineJSON struct {
	ID        uint64            `json:"id"`
	Attempt   int               `json:"attempt,omitempty"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Host      string            `json:"host"`
	Start     time.Time         `json:"start"`
	Conn      connJSON          `json:"conn"`
	DNS       *dnsJSON          `json:"dns,omitempty"`
	TLS       *tlsJSON          `json:"tls,omitempty"`
	Status    int               `json:"status,omitempty"`
	Proto     string            `json:"proto,omitempty"`
	BodyBytes int64             `json:"body_bytes"`
	BodyEOF   bool              `json:"body_eof"`
	Closed    bool              `json:"body_closed"`
	Early     bool              `json:"closed_early"`
	GetConns  int               `json:"get_conns"`
	Retries   int               `json:"transport_retries,omitempty"`
	Composed  bool              `json:"composed,omitempty"`
	Header    map[string]string `json:"header,omitempty"`
	Outcome   outcomeJSON       `json:"outcome"`
	Timings   timingsJSON       `json:"timings"`
	Events    []eventJSON       `json:"events"`
	Dropped   int               `json:"dropped_events,omitempty"`
}

// connJSON is the JSON form of [ConnInfo].
type connJSON struct {
	ID      uint64 `json:"id,omitempty"`
	New     bool   `json:"new"`
	Reused  bool   `json:"reused"`
	WasIdle bool   `json:"was_idle"`
	IdleNS  int64  `json:"idle_ns,omitempty"`
	Local   string `json:"local,omitempty"`
	Remote  string `json:"remote,omitempty"`
}

// dnsJSON is the JSON form of [DNSInfo].
type dnsJSON struct {
	Host  string   `json:"host"`
	Addrs []string `json:"addrs,omitempty"`
	Error string   `json:"error,omitempty"`
}

// tlsJSON is the JSON form of [TLSInfo].
type tlsJSON struct {
	// Version and Cipher are empty when the handshake failed.
	Version    string `json:"version"`
	Cipher     string `json:"cipher"`
	ALPN       string `json:"alpn,omitempty"`
	Resumed    bool   `json:"resumed"`
	ServerName string `json:"server_name,omitempty"`
	Error      string `json:"error,omitempty"`
}

// outcomeJSON is the JSON form of [Outcome].
type outcomeJSON struct {
	Class  Class  `json:"class"`
	Stage  Stage  `json:"stage"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// timingsJSON is the JSON form of [Timings], in nanoseconds.
type timingsJSON struct {
	PoolWait int64 `json:"pool_wait_ns"`
	DNS      int64 `json:"dns_ns"`
	Connect  int64 `json:"connect_ns"`
	TLS      int64 `json:"tls_ns"`
	Write    int64 `json:"write_ns"`
	Server   int64 `json:"server_ns"`
	Transfer int64 `json:"transfer_ns"`
	Total    int64 `json:"total_ns"`
	NewConn  bool  `json:"new_conn"`
	IdleFor  int64 `json:"idle_for_ns,omitempty"`
}

// eventJSON is the JSON form of [Event].
type eventJSON struct {
	Kind  string `json:"kind"`
	AtNS  int64  `json:"at_ns"`
	Late  bool   `json:"late,omitempty"`
	Conn  uint64 `json:"conn,omitempty"`
	N     int64  `json:"n,omitempty"`
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"`
}

// jsonForm returns the stable, redacted JSON form of tl.
func (tl *Timeline) jsonForm() timelineJSON {
	errText := tl.RedactError
	j := timelineJSON{
		ID: tl.ID, Attempt: tl.Attempt, Method: tl.Method, URL: tl.URL(), Host: tl.Host, Start: tl.Start,
		Status: tl.Status, Proto: tl.Proto, BodyBytes: tl.BodyBytes, BodyEOF: tl.BodyEOF, Closed: tl.BodyClosed,
		Early: tl.ClosedEarly, GetConns: tl.GetConns, Retries: tl.Retries, Composed: tl.Composed, Header: tl.Header, Dropped: tl.Dropped,
		Conn: connJSON{ID: tl.Conn.ID, New: tl.Conn.New(), Reused: tl.Conn.Reused, WasIdle: tl.Conn.WasIdle,
			IdleNS: int64(tl.Conn.IdleTime)},
		Outcome: outcomeJSON{Class: tl.Outcome.Class, Stage: tl.Outcome.Stage, Status: tl.Outcome.Status, Error: errText(tl.Outcome.Err)},
	}
	if tl.Conn.Local != nil {
		j.Conn.Local = tl.Conn.Local.String()
	}
	if tl.Conn.Remote != nil {
		j.Conn.Remote = tl.Conn.Remote.String()
	}
	if tl.DNS.Host != "" {
		d := &dnsJSON{Host: tl.DNS.Host, Error: errText(tl.DNS.Err)}
		for _, a := range tl.DNS.Addrs {
			d.Addrs = append(d.Addrs, a.String())
		}
		j.DNS = d
	}
	if tl.TLS.Done {
		j.TLS = &tlsJSON{ALPN: tl.TLS.ALPN, Resumed: tl.TLS.Resumed, ServerName: tl.TLS.ServerName, Error: errText(tl.TLS.Err)}
		if tl.TLS.Version != 0 {
			// A failed handshake agreed on none.
			j.TLS.Version, j.TLS.Cipher = tls.VersionName(tl.TLS.Version), tls.CipherSuiteName(tl.TLS.CipherSuite)
		}
	}
	t := tl.Timings()
	j.Timings = timingsJSON{PoolWait: int64(t.PoolWait), DNS: int64(t.DNS), Connect: int64(t.Connect), TLS: int64(t.TLS),
		Write: int64(t.Write), Server: int64(t.Server), Transfer: int64(t.Transfer), Total: int64(t.Total),
		NewConn: t.NewConn, IdleFor: int64(t.IdleFor)}
	j.Events = make([]eventJSON, 0, len(tl.Events))
	for _, e := range tl.Events {
		j.Events = append(j.Events, eventJSON{Kind: string(e.Kind), AtNS: int64(e.At), Late: e.Late, Conn: e.Conn,
			N: e.N, Addr: e.Addr, Error: errText(e.Err)})
	}
	return j
}

// MarshalJSON encodes tl in its stable, redacted form ([timelineJSON]).
func (tl *Timeline) MarshalJSON() ([]byte, error) {
	if tl == nil {
		return nil, errNilTimeline
	}
	return json.Marshal(tl.jsonForm())
}

// JSONLines is an [Observer] that writes each finished timeline as one line
// of JSON ([timelineJSON]) to a writer. Writes are serialised.
type JSONLines struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

// NewJSONLines returns a JSON Lines observer writing to w. A nil w (or a
// nil pointer in it) is an error.
func NewJSONLines(w io.Writer) (*JSONLines, error) {
	if isnil.Value(w) {
		return nil, errors.New("httptrace: NewJSONLines: nil writer")
	}
	return &JSONLines{enc: json.NewEncoder(w)}, nil
}

// Observe writes tl as one line.
func (j *JSONLines) Observe(tl *Timeline) {
	if j == nil || tl == nil {
		return
	}
	v := tl.jsonForm()
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.enc.Encode(v); err != nil && j.err == nil {
		j.err = err
	}
}

// Err returns the first write error, if any.
func (j *JSONLines) Err() error {
	if j == nil {
		return errors.New("httptrace: nil *JSONLines")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}
