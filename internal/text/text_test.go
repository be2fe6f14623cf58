package text

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestCut(t *testing.T) {
	require.Equal(t, "abc", Cut("abc", 3))
	require.Equal(t, "ab…", Cut("abcd", 3))
	require.Equal(t, "é…", Cut("éèê", 2), "runes, not bytes")
	require.Equal(t, "", Cut("abc", 0))
}

// TestWrap: every line fits, the first has its prefix and the rest theirs,
// no word is lost, and a word longer than a line is cut across lines.
func TestWrap(t *testing.T) {
	s := strings.Repeat("word ", 30) + strings.Repeat("x", 130)
	lines := Wrap(s, "  - ", "    ", 40)
	for i, l := range lines {
		require.LessOrEqual(t, Width(l), 40, "%q", l)
		prefix := "    "
		if i == 0 {
			prefix = "  - "
		}
		require.True(t, strings.HasPrefix(l, prefix), "%q", l)
	}
	var joined strings.Builder
	for _, l := range lines {
		joined.WriteString(strings.TrimSpace(strings.TrimPrefix(l, "  - ")))
	}
	require.Equal(t, strings.Repeat("word", 30)+strings.Repeat("x", 130), strings.ReplaceAll(joined.String(), " ", ""))
	require.Equal(t, []string{"  - a b"}, Wrap("a   b", "  - ", "    ", 40))
	require.Equal(t, []string{"  - "}, Wrap("", "  - ", "    ", 40))
	require.Equal(t, []string{"one two", "  three"}, Wrap("one two three", "", "  ", 8))
}

func TestFirstLine(t *testing.T) {
	require.Equal(t, "a", FirstLine("a\nb"))
	require.Equal(t, "a", FirstLine("a"))
}

func TestPlural(t *testing.T) {
	require.Equal(t, "1 request", Plural(1, "request"))
	require.Equal(t, "0 requests", Plural(int64(0), "request"))
	require.Equal(t, "3 writes", Plural(3, "write"))
}
