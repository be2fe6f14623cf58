package httptrace_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/connaudit/connaudit/httptrace"
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
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindDNSStart, 1), ev(httptrace.KindDNSDone, 3),
				ev(httptrace.KindConnectStart, 3), ev(httptrace.KindConnectDone, 5),
				ev(httptrace.KindTLSStart, 5), ev(httptrace.KindTLSDone, 9), ev(httptrace.KindGotConn, 10),
				ev(httptrace.KindWroteHeaders, 10), ev(httptrace.KindWroteRequest, 11), ev(httptrace.KindFirstByte, 20),
				ev(httptrace.KindResponse, 21), ev(httptrace.KindPutIdleConn, 25), ev(httptrace.KindBodyEOF, 25),
				ev(httptrace.KindBodyClose, 26), ev(httptrace.KindDone, 26),
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
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 1), ev(httptrace.KindWroteRequest, 2),
				ev(httptrace.KindFirstByte, 5), ev(httptrace.KindBodyEOF, 6), ev(httptrace.KindBodyClose, 7), ev(httptrace.KindDone, 7),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Write: 1 * ms, Server: 3 * ms, Transfer: 1 * ms, Total: 7 * ms, IdleFor: 3 * time.Second},
		},
		{
			name: "waited for a busy connection: all of the acquisition is pool wait",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 40), ev(httptrace.KindWroteRequest, 41),
				ev(httptrace.KindFirstByte, 45), ev(httptrace.KindBodyEOF, 46), ev(httptrace.KindBodyClose, 46), ev(httptrace.KindDone, 46),
			},
			want: httptrace.Timings{PoolWait: 40 * ms, Write: 1 * ms, Server: 4 * ms, Transfer: 1 * ms, Total: 46 * ms},
		},
		{
			name: "body closed before EOF: transfer ends at close",
			conn: httptrace.ConnInfo{Reused: true, WasIdle: true, IdleTime: ms},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 0), ev(httptrace.KindWroteRequest, 1),
				ev(httptrace.KindFirstByte, 3), ev(httptrace.KindBodyClose, 8), ev(httptrace.KindDone, 8),
			},
			want: httptrace.Timings{Write: 1 * ms, Server: 2 * ms, Transfer: 5 * ms, Total: 8 * ms, IdleFor: ms},
		},
		{
			name: "two addresses: connect spans the first start to the last done",
			conn: httptrace.ConnInfo{Dialed: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindDNSStart, 0), ev(httptrace.KindDNSDone, 1),
				ev(httptrace.KindConnectStart, 1), failed(ev(httptrace.KindConnectDone, 2)),
				ev(httptrace.KindConnectStart, 2), ev(httptrace.KindConnectDone, 4), ev(httptrace.KindGotConn, 4),
				ev(httptrace.KindWroteRequest, 5), ev(httptrace.KindFirstByte, 6), ev(httptrace.KindBodyEOF, 6),
				ev(httptrace.KindBodyClose, 6), ev(httptrace.KindDone, 6),
			},
			want: httptrace.Timings{DNS: 1 * ms, Connect: 3 * ms, Write: 1 * ms, Server: 1 * ms, Total: 6 * ms, NewConn: true},
		},
		{
			name: "failed while connecting: no later stage",
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindConnectStart, 1), failed(ev(httptrace.KindConnectDone, 4)),
				failed(ev(httptrace.KindDone, 4)),
			},
			want: httptrace.Timings{Connect: 3 * ms, Total: 4 * ms},
		},
		{
			name: "late events of a background dial are ignored",
			conn: httptrace.ConnInfo{},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindConnectStart, 1), failed(ev(httptrace.KindDone, 2)),
				late(ev(httptrace.KindConnectDone, 50)), late(ev(httptrace.KindTLSStart, 50)), late(ev(httptrace.KindTLSDone, 60)),
			},
			want: httptrace.Timings{Total: 2 * ms},
		},
		{
			name: "reused but not idle: no idle time",
			conn: httptrace.ConnInfo{Reused: true, IdleTime: time.Hour},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 2), ev(httptrace.KindDone, 3),
			},
			want: httptrace.Timings{PoolWait: 2 * ms, Total: 3 * ms},
		},
		{
			name: "request reported written after the first byte, no headers event: the wait counts from the connection",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 1), ev(httptrace.KindFirstByte, 2),
				ev(httptrace.KindWroteRequest, 3), ev(httptrace.KindDone, 4),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Server: 1 * ms, Total: 4 * ms},
		},
		{
			name: "HTTP/2 request written reported late: the headers written stand for it",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 1), ev(httptrace.KindWroteHeaders, 2),
				ev(httptrace.KindFirstByte, 5), ev(httptrace.KindBodyEOF, 6), ev(httptrace.KindBodyClose, 7),
				ev(httptrace.KindDone, 7), late(ev(httptrace.KindWroteRequest, 8)),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Write: 1 * ms, Server: 3 * ms, Transfer: 1 * ms, Total: 7 * ms},
		},
		{
			name: "HTTP/2 headers and request written both reported late",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 1), ev(httptrace.KindFirstByte, 5),
				ev(httptrace.KindBodyEOF, 6), ev(httptrace.KindBodyClose, 7), ev(httptrace.KindDone, 7),
				late(ev(httptrace.KindWroteHeaders, 8)), late(ev(httptrace.KindWroteRequest, 8)),
			},
			want: httptrace.Timings{PoolWait: 1 * ms, Server: 4 * ms, Transfer: 1 * ms, Total: 7 * ms},
		},
		{
			name: "server answered before the body was all sent",
			conn: httptrace.ConnInfo{Reused: true},
			events: []httptrace.Event{
				ev(httptrace.KindGetConn, 0), ev(httptrace.KindGotConn, 0), ev(httptrace.KindWroteHeaders, 1),
				ev(httptrace.KindFirstByte, 3), ev(httptrace.KindWroteRequest, 6), ev(httptrace.KindDone, 7),
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
			j := tl.JSON().Timings
			assert.Equal(t, int64(c.want.Total), j.Total)
			assert.Equal(t, int64(c.want.PoolWait), j.PoolWait)
			assert.Equal(t, c.want.NewConn, j.NewConn)
		})
	}
}
