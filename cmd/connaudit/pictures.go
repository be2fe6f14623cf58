package main

import (
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/picture"
)

// pictureFlags are -html and -trace-events, the files a run's pictures go
// to: a page of connection lanes, and the Trace Event Format for Perfetto.
type pictureFlags struct {
	html, traceEvents string
	htmlFile, trace   *outputFile
	// tw streams the trace as requests end (probe); reqs keeps the
	// attempts the page draws, omitted counts those past its bound.
	mu      sync.Mutex
	tw      *picture.TraceWriter
	reqs    []picture.Request
	omitted int
}

func (pf *pictureFlags) register(fs *flag.FlagSet, traceEvents bool) {
	fs.StringVar(&pf.html, "html", "", "also write a page of connection lanes (one self-contained HTML file) to this `file`")
	if traceEvents {
		fs.StringVar(&pf.traceEvents, "trace-events", "", "also write the lanes in the Trace Event Format (Perfetto, chrome://tracing) to this `file`")
	}
}

// open opens the files named, before the run: a path that cannot be
// written is a usage error at once.
func (pf *pictureFlags) open() error {
	var err error
	if pf.html != "" {
		if pf.htmlFile, err = openOutput(pf.html); err != nil {
			return fmt.Errorf("-html: %w", err)
		}
	}
	if pf.traceEvents != "" {
		if pf.trace, err = openOutput(pf.traceEvents); err != nil {
			pf.discard()
			return fmt.Errorf("-trace-events: %w", err)
		}
	}
	return nil
}

// stream starts the trace file as a stream from origin, for a run of any
// length: each timeline is written as it ends.
func (pf *pictureFlags) stream(origin time.Time, title string) error {
	if pf.trace == nil {
		return nil
	}
	w, err := pf.trace.streamTo()
	if err != nil {
		return err
	}
	pf.tw = picture.NewTraceWriter(w, origin)
	pf.tw.Set(title)
	return nil
}

// add draws tl: its attempts go to the trace as they come, and to the
// page up to its bound.
func (pf *pictureFlags) add(tl *httptrace.Timeline) {
	if pf.htmlFile == nil && pf.tw == nil {
		return
	}
	reqs := picture.Attempts(tl)
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.tw != nil {
		for _, r := range reqs {
			pf.tw.Request(r)
		}
	}
	if pf.htmlFile != nil {
		if len(pf.reqs)+len(reqs) > picture.MaxRequests {
			pf.omitted += len(reqs)
			return
		}
		pf.reqs = append(pf.reqs, reqs...)
	}
}

// finish writes the page and ends the trace: the streamed one with the
// page's connections, else the page's sets whole.
func (pf *pictureFlags) finish(page picture.Page) error {
	sets := page.Sets
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if pf.htmlFile != nil {
		keep(pf.htmlFile.write(func(w io.Writer) error {
			return picture.WriteHTML(w, page)
		}))
	}
	if pf.trace != nil {
		keep(pf.trace.write(func(w io.Writer) error {
			if pf.tw == nil {
				return picture.WriteTrace(w, sets)
			}
			for _, s := range sets {
				for _, c := range s.Conns {
					pf.tw.Conn(c)
				}
			}
			return pf.tw.Close()
		}))
	}
	return first
}

// discard removes the files a run that wrote no report created.
func (pf *pictureFlags) discard() {
	if pf.htmlFile != nil {
		pf.htmlFile.discard()
	}
	if pf.trace != nil {
		pf.trace.discard()
	}
}
