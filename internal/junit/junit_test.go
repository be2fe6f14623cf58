package junit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/junit"
	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestWrite: a passed, a skipped and a failed case, escaped, in the form
// CI systems read.
func TestWrite(t *testing.T) {
	var b strings.Builder
	require.NoError(t, junit.Write(&b, junit.Suites{Suites: []junit.Suite{{Name: "s", Tests: 3, Failures: 1, Skipped: 1, Time: "0.100",
		Cases: []junit.Case{
			{Name: "ok", Classname: "c", Time: "0.001"},
			{Name: "skip", Classname: "c", Time: "0.000", Skipped: &junit.Skipped{Message: "why"}},
			{Name: "fail", Classname: "c", Time: "0.002", Failure: &junit.Failure{Message: "a <b>", Text: "all & more"}},
		}}}}))
	require.Equal(t, `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="s" tests="3" failures="1" skipped="1" time="0.100">
    <testcase name="ok" classname="c" time="0.001"></testcase>
    <testcase name="skip" classname="c" time="0.000">
      <skipped message="why"></skipped>
    </testcase>
    <testcase name="fail" classname="c" time="0.002">
      <failure message="a &lt;b&gt;">all &amp; more</failure>
    </testcase>
  </testsuite>
</testsuites>
`, b.String())
}

// TestWriteEmpty: a document of no suite.
func TestWriteEmpty(t *testing.T) {
	var b strings.Builder
	require.NoError(t, junit.Write(&b, junit.Suites{}))
	require.Equal(t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites></testsuites>\n", b.String())
}

// TestStreamWriteError: after a failed write a stream writes nothing more
// and says the error.
func TestStreamWriteError(t *testing.T) {
	w := &failAfter{n: 1}
	s := junit.NewStream(w)
	require.ErrorIs(t, s.Add(junit.Suite{Name: "a"}), errFull)
	require.ErrorIs(t, s.Add(junit.Suite{Name: "b"}), errFull)
	require.ErrorIs(t, s.Close(), errFull)
	require.Equal(t, 2, w.calls)
}

var errFull = errors.New("full")

// failAfter fails every write after its first n.
type failAfter struct{ n, calls int }

func (f *failAfter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls > f.n {
		return 0, errFull
	}
	return len(p), nil
}
