package junit

import (
	"encoding/xml"
	"io"
)

// Stream writes a JUnit document one suite at a time, as each is ready, so
// that no suite is held once written: [NewStream] writes the document's
// head, [Stream.Add] a suite, [Stream.Close] the end. The document is the
// one [Write] writes for the same suites. A Stream is not safe for
// concurrent use.
type Stream struct {
	w   io.Writer
	n   int
	err error
}

// NewStream writes the head of a JUnit document to w and returns the
// stream that writes the rest.
func NewStream(w io.Writer) *Stream {
	s := &Stream{w: w}
	_, s.err = io.WriteString(w, xml.Header+"<testsuites>")
	return s
}

// Add writes one suite. After a write failed it writes nothing more and
// returns that error.
func (s *Stream) Add(suite Suite) error {
	if s.err != nil {
		return s.err
	}
	if _, s.err = io.WriteString(s.w, "\n"); s.err != nil {
		return s.err
	}
	enc := xml.NewEncoder(s.w)
	enc.Indent("  ", "  ")
	if s.err = enc.EncodeElement(suite, xml.StartElement{Name: xml.Name{Local: "testsuite"}}); s.err == nil {
		s.err = enc.Close()
	}
	s.n++
	return s.err
}

// Close writes the end of the document; it does not close the writer.
func (s *Stream) Close() error {
	if s.err != nil {
		return s.err
	}
	end := "\n</testsuites>\n"
	if s.n == 0 {
		end = "</testsuites>\n"
	}
	_, s.err = io.WriteString(s.w, end)
	return s.err
}
