package testserver

import (
	"io"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ServeH2 speaks the server's side of HTTP/2 frames on c, a connection
// whose TLS handshake chose "h2": it reads the client's preface, sends the
// server's settings and acknowledges the client's, decodes each header
// block (a *http2.MetaHeadersFrame), and hands every other frame to frame,
// until frame returns false or a read or the first write fails.
func ServeH2(c io.ReadWriter, frame func(fr *http2.Framer, f http2.Frame) bool) {
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if s, ok := f.(*http2.SettingsFrame); ok {
			if !s.IsAck() {
				fr.WriteSettingsAck()
			}
			continue
		}
		if !frame(fr, f) {
			return
		}
	}
}
