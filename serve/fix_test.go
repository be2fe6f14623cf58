package serve

import (
	"strings"
	"testing"
)

// TestIdleFixDirection: every client's fix for an idle timeout as long as
// the servers' keep-alive timeout, or longer, says to drop an idle
// connection before the server would: below or shorter than that timeout,
// never "longer than" it or requests "further apart".
func TestIdleFixDirection(t *testing.T) {
	all := map[string]fixes{"(generic)": generic}
	for name, f := range clientFixes {
		all[name] = f
	}
	for name, f := range all {
		s := f.idle
		if s == "" {
			continue // the generic one is used
		}
		if !strings.Contains(s, "below") && !strings.Contains(s, "shorter than") {
			t.Errorf("%s: %q says no bound below the servers' keep-alive timeout", name, s)
		}
		for _, wrong := range []string{"longer than", "further apart", "after an idle period"} {
			if strings.Contains(s, wrong) {
				t.Errorf("%s: %q says %q: the wrong way", name, s, wrong)
			}
		}
	}
}
