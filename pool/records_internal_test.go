package pool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordReader: records are followed across reads whatever the cuts
// (a header split, several records in one read); the last one read is
// remembered with whether the connection was idle then.
func TestRecordReader(t *testing.T) {
	stream := []byte{
		23, 3, 3, 0, 4, 'd', 'a', 't', 'a', // application data, 4 bytes
		21, 3, 3, 0, 2, 1, 0, // an alert (close_notify), TLS 1.2
	}
	for cut := range len(stream) + 1 {
		var (
			r  recordReader
			io connIO
		)
		r.feed(stream[:cut], false, true, &io)
		r.feed(stream[cut:], true, true, &io)
		c := &connState{io: &io, Conn: Conn{TLSVersion: "TLS 1.2"}}
		alert, idle := c.lastAlert()
		require.True(t, alert, "cut at %d", cut)
		require.Equal(t, cut < 14, idle, "cut at %d: the alert's header ends in the idle read", cut)
	}
	// TLS 1.3: an alert is application data of 19 bytes.
	var (
		r  recordReader
		io connIO
	)
	r.feed(append([]byte{23, 3, 3, 0, 19}, make([]byte, 19)...), true, true, &io)
	for version, want := range map[string]bool{"TLS 1.3": true, "TLS 1.2": false} {
		alert, _ := (&connState{io: &io, Conn: Conn{TLSVersion: version}}).lastAlert()
		require.Equal(t, want, alert, version)
	}
	r.feed(append([]byte{23, 3, 3, 0, 20}, make([]byte, 20)...), true, true, &io)
	alert, _ := (&connState{io: &io, Conn: Conn{TLSVersion: "TLS 1.3"}}).lastAlert()
	require.False(t, alert, "data")
	// What comes once the client began its close is not recorded.
	r.feed([]byte{21, 3, 3, 0, 2, 1, 0}, true, false, &io)
	alert, _ = (&connState{io: &io, Conn: Conn{TLSVersion: "TLS 1.3"}}).lastAlert()
	require.False(t, alert, "the server's answer to the client's close_notify")
}

// TestRecordReaderLost: bytes that are no TLS record (a proxy's reply to
// CONNECT before the handshake) stop the following: no record is claimed.
func TestRecordReaderLost(t *testing.T) {
	var (
		r  recordReader
		io connIO
	)
	r.feed([]byte("HTTP/1.1 200 Connection established\r\n\r\n"), false, true, &io)
	r.feed([]byte{21, 3, 3, 0, 2, 1, 0}, true, true, &io)
	alert, _ := (&connState{io: &io, Conn: Conn{TLSVersion: "TLS 1.2"}}).lastAlert()
	require.False(t, alert)
	require.True(t, r.lost)
}
