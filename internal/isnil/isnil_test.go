package isnil

import (
	"bytes"
	"io"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/stretchr/testify/assert"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestValue: nil, and nil pointers, maps, functions in an interface, are
// nil; values, and empty but usable ones, are not.
func TestValue(t *testing.T) {
	var (
		buf  *bytes.Buffer
		w    io.Writer = buf
		fn   func()
		m    map[string]int
		zero struct{}
	)
	for _, v := range []any{nil, buf, w, fn, m} {
		assert.True(t, Value(v), "%T", v)
	}
	for _, v := range []any{&bytes.Buffer{}, io.Discard, func() {}, map[string]int{}, zero, 0, ""} {
		assert.False(t, Value(v), "%T", v)
	}
}
