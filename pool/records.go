package pool

// TLS record content types (RFC 8446, 5.1).
const (
	recordAlert           = 21
	recordApplicationData = 23
)

// tls13AlertRecord is the length of a TLS 1.3 record that carries an
// alert: the alert's 2 bytes, the inner content type and the AEAD's
// 16-byte tag (every TLS 1.3 cipher suite crypto/tls offers has one), with
// no padding. In TLS 1.3 an alert travels as application data: its size is
// what tells it from data, but for 2 bytes of data, which no HTTP/1 server
// sends alone.
const tls13AlertRecord = 2 + 1 + 16

// recordReader follows the TLS records of the bytes read from a connection
// the Transport runs TLS over, from the first byte on: their headers are
// in the clear (RFC 8446, 5.1). It remembers the last record and whether
// its header was read while the connection was idle: what net/http's read
// loop reacted to when it closed an HTTP/1 connection with no read error
// the pool could see (crypto/tls reads the server's close_notify and
// reports EOF, the FIN unread): an alert (the server closed it) or data
// (bytes when no response was due). It is used from the connection's reads
// alone, which never run at once.
type recordReader struct {
	hdr       [5]byte
	hdrN      int  // header bytes read of the next record
	remaining int  // bytes of the current record still to come
	lost      bool // a header was no TLS record's (a proxy's reply came first, say): no record is followed
}

// maxRecord bounds a TLS record's length (RFC 8446, 5.2: 2^14 + 256; TLS
// 1.2 allows 2^14 + 2048).
const maxRecord = 1<<14 + 2048

// feed follows b, read while the connection was idle if idle, and records
// the last record header in io unless record is false (the client began
// its own close: what comes is the server's answer to it).
func (r *recordReader) feed(b []byte, idle, record bool, io *connIO) {
	for len(b) > 0 && !r.lost {
		if r.remaining > 0 {
			n := min(r.remaining, len(b))
			r.remaining -= n
			b = b[n:]
			continue
		}
		n := copy(r.hdr[r.hdrN:], b)
		r.hdrN += n
		b = b[n:]
		if r.hdrN < len(r.hdr) {
			return
		}
		r.hdrN = 0
		typ, length := r.hdr[0], int(r.hdr[3])<<8|int(r.hdr[4])
		if typ < 20 || typ > 24 || r.hdr[1] != 3 || length > maxRecord {
			r.lost = true
			io.lastRecord.Store(0)
			return
		}
		r.remaining = length
		if !record {
			continue
		}
		v := int64(typ)<<16 | int64(length)
		if idle {
			v |= 1 << 32
		}
		io.lastRecord.Store(v)
	}
}

// lastAlert reports whether the last TLS record c read was an alert (of
// the alert type, in TLS 1.2 and earlier, where the type is in the clear,
// or TLS 1.3 application data the size of an alert), and whether its header
// was read while c was idle.
func (c *connState) lastAlert() (alert, idle bool) {
	v := c.io.lastRecord.Load()
	if v == 0 {
		return false, false
	}
	typ, length := (v>>16)&0xff, v&0xffff
	alert = typ == recordAlert || (typ == recordApplicationData && length == tls13AlertRecord && c.TLSVersion == "TLS 1.3")
	return alert, v&(1<<32) != 0
}
