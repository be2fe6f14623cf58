package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Bounds on the files named on the command line, which are read whole.
const (
	maxBodyFile   = 64 << 20 // -d @FILE
	maxCACertFile = 1 << 20  // -cacert FILE
)

// readUserFile reads the file name, which must be a regular file of at most
// limit bytes (a whole number of MiB). Anything else is refused before it
// is read: a directory, a device (/dev/zero never ends), a FIFO (whose
// open and reads wait for a writer) or a socket. The file is opened
// without blocking and checked again once open, in case it was replaced,
// and read no further than one byte past limit, in case it grew.
func readUserFile(name string, limit int64) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if err := checkUserFile(name, st, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkUserFile(name, st, limit); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than the %d MiB limit", name, limit>>20)
	}
	return b, nil
}

// checkUserFile checks that st, name's, is a regular file of at most limit
// bytes.
func checkUserFile(name string, st os.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	if st.Size() > limit {
		return fmt.Errorf("%s is larger than the %d MiB limit", name, limit>>20)
	}
	return nil
}

// outputFile is a file named on the command line for a report written at
// the end of a run (probe -o, scenarios -junit). It is opened before the
// run, so that a path that cannot be written is a usage error at once,
// not after the run; but it is changed only when the report is written:
// a file that existed keeps its content until then, and a file the run
// created is removed if no report comes.
type outputFile struct {
	f       *os.File
	created bool
	// streamed is set once something was written through streamTo: write
	// then appends the report instead of replacing the content.
	streamed bool
}

// streamTo returns the file to write to before the report (a probe's
// timelines as they finish, with -v); its content is replaced first.
func (o *outputFile) streamTo() (io.Writer, error) {
	if !o.streamed {
		if st, err := o.f.Stat(); err == nil && st.Mode().IsRegular() {
			if err := o.f.Truncate(0); err != nil {
				return nil, err
			}
		}
		o.streamed = true
	}
	return o.f, nil
}

// openOutput opens name for writing, creating it if it does not exist.
func openOutput(name string) (*outputFile, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err == nil {
		return &outputFile{f: f, created: true}, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	f, err = os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return &outputFile{f: f}, nil
}

// write replaces the file's content (a regular file's: /dev/stdout has
// none to replace) with what report writes, and closes the file.
func (o *outputFile) write(report func(io.Writer) error) error {
	if st, err := o.f.Stat(); err == nil && st.Mode().IsRegular() && !o.streamed {
		if err := o.f.Truncate(0); err != nil {
			o.f.Close()
			return err
		}
	}
	err := report(o.f)
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// discard closes the file unwritten, and removes it if openOutput created
// it.
func (o *outputFile) discard() {
	o.f.Close()
	if o.created {
		os.Remove(o.f.Name())
	}
}
