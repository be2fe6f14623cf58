package httptrace_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

func ev(k httptrace.Kind, ms int) httptrace.Event {
	return httptrace.Event{Kind: k, At: time.Duration(ms) * time.Millisecond}
}

func late(e httptrace.Event) httptrace.Event {
	e.Late = true
	return e
}

func failed(e httptrace.Event) httptrace.Event {
	e.Err = errors.New("failed")
	return e
}

const ms = time.Millisecond

// TestTimings derives stage durations from hand-built timelines.
func TestTimings(t *testing.T) {
	cases := []struct {
		name   string
		conn   httptrace.ConnInfo
		events []httptrace.Event
		want   httptrace.Timings
	}{
		{
			name: "new connection with DNS, connect and TLS",
			conn: httptrace.ConnInfo{Dialed: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindDNSStart, 1), ev(vocab.KindDNSDone, 3),
				ev(vocab.KindConnectStart, 3), ev(vocab.KindConnectDone, 5),
				ev(vocab.KindTLSStart, 5), ev(vocab.KindTLSDone, 9), ev(vocab.KindGotConn, 10),
				ev(vocab.KindWroteHeaders, 10), ev(vocab.KindWroteRequest, 11), ev(vocab.KindFirstByte, 20),
				ev(vocab.KindResponse, 21), ev(vocab.KindPutIdleConn, 25), ev(vocab.KindBodyEOF, 25),
				ev(vocab.KindBodyClose, 26), ev(vocab.KindDone, 26),
			},
			want: httptrace.Timings{
				PoolWait: 2 * ms, // 10ms to acquire, 8ms of it dialing
				DNS:      2 * ms, Connect: 2 * ms, TLS: 4 * ms,
				Write: 1 * ms, Server: 9 * ms, Transfer: 5 * ms, Total: 26 * ms,
				NewConn: true,
			},
		},
		{
			name: "idle connection reused",
			conn: httptrace.ConnInfo{Reused: true, WasIdle: true, IdleTime: 3 * time.Second},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindWroteRequest, 2),
				ev(vocab.KindFirstByte, 5), ev(vocab.KindBodyEOF, 6), ev(vocab.KindBodyClose, 7), ev(vocab.KindDone, 7),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Write: 1 * ms, Server: 3 * ms, Transfer: 1 * ms, Total: 7 * ms, IdleFor: 3 * time.Second},
		},
		{
			name: "waited for a busy connection: all of the acquisition is pool wait",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 40), ev(vocab.KindWroteRequest, 41),
				ev(vocab.KindFirstByte, 45), ev(vocab.KindBodyEOF, 46), ev(vocab.KindBodyClose, 46), ev(vocab.KindDone, 46),
			},
			want: httptrace.Timings{PoolWait: 40 * ms, Write: 1 * ms, Server: 4 * ms, Transfer: 1 * ms, Total: 46 * ms},
		},
		{
			name: "body closed before EOF: transfer ends at close",
			conn: httptrace.ConnInfo{Reused: true, WasIdle: true, IdleTime: ms},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 0), ev(vocab.KindWroteRequest, 1),
				ev(vocab.KindFirstByte, 3), ev(vocab.KindBodyClose, 8), ev(vocab.KindDone, 8),
			},
			want: httptrace.Timings{Write: 1 * ms, Server: 2 * ms, Transfer: 5 * ms, Total: 8 * ms, IdleFor: ms},
		},
		{
			name: "two addresses: connect spans the first start to the last done",
			conn: httptrace.ConnInfo{Dialed: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindDNSStart, 0), ev(vocab.KindDNSDone, 1),
				ev(vocab.KindConnectStart, 1), failed(ev(vocab.KindConnectDone, 2)),
				ev(vocab.KindConnectStart, 2), ev(vocab.KindConnectDone, 4), ev(vocab.KindGotConn, 4),
				ev(vocab.KindWroteRequest, 5), ev(vocab.KindFirstByte, 6), ev(vocab.KindBodyEOF, 6),
				ev(vocab.KindBodyClose, 6), ev(vocab.KindDone, 6),
			},
			want: httptrace.Timings{DNS: 1 * ms, Connect: 3 * ms, Write: 1 * ms, Server: 1 * ms, Total: 6 * ms, NewConn: true},
		},
		{
			name: "failed while connecting: no later stage",
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindConnectStart, 1), failed(ev(vocab.KindConnectDone, 4)),
				failed(ev(vocab.KindDone, 4)),
			},
			want: httptrace.Timings{Connect: 3 * ms, Total: 4 * ms},
		},
		{
			name: "late events of a background dial are ignored",
			conn: httptrace.ConnInfo{},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindConnectStart, 1), failed(ev(vocab.KindDone, 2)),
				late(ev(vocab.KindConnectDone, 50)), late(ev(vocab.KindTLSStart, 50)), late(ev(vocab.KindTLSDone, 60)),
			},
			want: httptrace.Timings{Total: 2 * ms},
		},
		{
			name: "reused but not idle: no idle time",
			conn: httptrace.ConnInfo{Reused: true, IdleTime: time.Hour},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 2), ev(vocab.KindDone, 3),
			},
			want: httptrace.Timings{PoolWait: 2 * ms, Total: 3 * ms},
		},
		{
			name: "request reported written after the first byte, no headers event: the wait counts from the connection",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindFirstByte, 2),
				ev(vocab.KindWroteRequest, 3), ev(vocab.KindDone, 4),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Server: 1 * ms, Total: 4 * ms},
		},
		{
			name: "HTTP/2 request written reported late: the headers written stand for it",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindWroteHeaders, 2),
				ev(vocab.KindFirstByte, 5), ev(vocab.KindBodyEOF, 6), ev(vocab.KindBodyClose, 7),
				ev(vocab.KindDone, 7), late(ev(vocab.KindWroteRequest, 8)),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Write: 1 * ms, Server: 3 * ms, Transfer: 1 * ms, Total: 7 * ms},
		},
		{
			name: "HTTP/2 headers and request written both reported late",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 1), ev(vocab.KindFirstByte, 5),
				ev(vocab.KindBodyEOF, 6), ev(vocab.KindBodyClose, 7), ev(vocab.KindDone, 7),
				late(ev(vocab.KindWroteHeaders, 8)), late(ev(vocab.KindWroteRequest, 8)),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Server: 4 * ms, Transfer: 1 * ms, Total: 7 * ms},
		},
		{
			name: "server answered before the body was all sent",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(vocab.KindGetConn, 0), ev(vocab.KindGotConn, 0), ev(vocab.KindWroteHeaders, 1),
				ev(vocab.KindFirstByte, 3), ev(vocab.KindWroteRequest, 6), ev(vocab.KindDone, 7),
			},
			want: httptrace.Timings{Write: 1 * ms, Server: 2 * ms, Total: 7 * ms},
		},
		{
			name: "empty",
			want: httptrace.Timings{}, // no connection: neither new nor reused
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := &httptrace.Timeline{Events: c.events, Conn: c.conn}
			assert.Equal(t, c.want, tl.Timings())
			j := jsonOf(t, tl).Timings
			assert.Equal(t, int64(c.want.Total), j.Total)
			assert.Equal(t, int64(c.want.PoolWait), j.PoolWait)
			assert.Equal(t, c.want.NewConn, j.NewConn)
		})
	}
}
