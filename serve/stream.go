package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/connaudit/connaudit/internal/junit"
)

// jsonStream writes one JSON document, {"protocol": …, "sessions": [ … ]},
// a session at a time as each ends, so that none is held once written:
// the head at once, each session as it is added, the end at close. The
// document is the one [WriteJSON] writes for the same sessions. After a
// failed write it writes nothing more and returns that error.
type jsonStream struct {
	w   io.Writer
	n   int
	err error
}

func newJSONStream(w io.Writer) *jsonStream {
	js := &jsonStream{w: w}
	p, _ := json.Marshal(Protocol)
	_, js.err = io.WriteString(w, "{\n  \"protocol\": "+string(p)+",\n  \"sessions\": [")
	return js
}

func (js *jsonStream) add(r *SessionReport) error {
	if js.err != nil {
		return js.err
	}
	b, err := json.MarshalIndent(r, "    ", "  ")
	if err != nil {
		js.err = err
		return err
	}
	sep := "\n    "
	if js.n > 0 {
		sep = ",\n    "
	}
	js.n++
	if _, js.err = io.WriteString(js.w, sep); js.err == nil {
		_, js.err = js.w.Write(b)
	}
	return js.err
}

func (js *jsonStream) close() error {
	if js.err != nil {
		return js.err
	}
	end := "]\n}\n"
	if js.n > 0 {
		end = "\n  ]\n}\n"
	}
	_, js.err = io.WriteString(js.w, end)
	return js.err
}

// junitFile is the JUnit report's file, written as sessions end. A
// regular file (or one that does not exist yet) is written through a
// temporary file beside it, renamed over it at the end: the file is
// either as it was or the whole report, never a report cut short. Any
// other file (a device, a pipe) is written as the sessions end.
type junitFile struct {
	path string
	f    *os.File
	tmp  bool
	mode fs.FileMode
	st   *junit.Stream
}

// createJUnit opens the JUnit report's file: it fails at once, before
// any audit, when the file cannot be written.
func createJUnit(path string) (*junitFile, error) {
	jf := &junitFile{path: path, mode: 0o644}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("serve: the JUnit file %s is a directory", path)
	case err == nil && !st.Mode().IsRegular():
		if jf.f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
			return nil, fmt.Errorf("serve: the JUnit file: %w", err)
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("serve: the JUnit file: %w", err)
	default:
		if err == nil {
			jf.mode = st.Mode().Perm()
		}
		if jf.f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*"); err != nil {
			return nil, fmt.Errorf("serve: the JUnit file: %w", err)
		}
		jf.tmp = true
	}
	jf.st = junit.NewStream(jf.f)
	return jf, nil
}

func (jf *junitFile) add(r *SessionReport) error { return jf.st.Add(junitSuite(r)) }

// commit ends the document and puts it in place.
func (jf *junitFile) commit() error {
	err := jf.st.Close()
	if cerr := jf.f.Close(); err == nil {
		err = cerr
	}
	if !jf.tmp {
		return err
	}
	if err == nil {
		err = os.Chmod(jf.f.Name(), jf.mode)
	}
	if err == nil {
		err = os.Rename(jf.f.Name(), jf.path)
	}
	if err != nil {
		os.Remove(jf.f.Name())
		return fmt.Errorf("serve: writing the JUnit file %s: %w", jf.path, err)
	}
	jf.tmp = false
	return nil
}

// discard removes the temporary file, if it is still there.
func (jf *junitFile) discard() {
	jf.f.Close()
	if jf.tmp {
		os.Remove(jf.f.Name())
	}
}
