package audit

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/retry"
)

// TestDefaultsFixesNameWhatToConfigure: a retry layer audited at its
// defaults (RetryAtDefaults) is told what to configure, never a field of
// retry.Policy, which it does not have: for every retry contract, whatever
// it was seen to do (more attempts, fewer, another outcome, cut by the
// guard). The same layer configured for the contracts is told the field.
func TestDefaultsFixesNameWhatToConfigure(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[retry.Policy]().Fields() {
		fields = append(fields, f.Name)
	}
	field := regexp.MustCompile(`\b(` + strings.Join(fields, "|") + `)\b`)
	named := 0
	for _, s := range Catalogue() {
		if s.Contract == "" {
			continue
		}
		e := s.Expect
		seen := func(edit func(o *Observed)) Observed {
			o := Observed{ClientAttempts: e.ClientAttempts, ServerRequests: e.ServerRequests, Class: e.Class,
				Stage: e.Stage, Status: e.Status, Recovered: true}
			edit(&o)
			return o
		}
		for name, o := range map[string]Observed{
			"more": seen(func(o *Observed) { o.ClientAttempts += 2; o.ServerRequests += 2 }),
			"fewer": seen(func(o *Observed) {
				o.ClientAttempts = max(1, o.ClientAttempts-1)
				o.ServerRequests = int64(o.ClientAttempts)
			}),
			"ok":   seen(func(o *Observed) { o.Class, o.Stage, o.Status = httptrace.ClassOK, "", 503 }),
			"late": seen(func(o *Observed) { o.Class, o.Stage = httptrace.ClassDeadline, httptrace.StageAwaitHeaders }),
			"budget": seen(func(o *Observed) {
				o.ClientAttempts = s.Policy.MaxRetries + 1
				o.Class, o.Status = httptrace.ClassOK, 503
			}),
			"guard": seen(func(o *Observed) {
				o.Unbounded, o.UnboundedStage, o.Class, o.Stage = true, httptrace.StageAwaitHeaders, httptrace.ClassDeadline, httptrace.StageAwaitHeaders
			}),
		} {
			mismatches := compare(e, o)
			if len(mismatches) == 0 {
				continue
			}
			fix := subject{reference: true, retryDefaults: true}.fixFor(s, o, mismatches, 10*time.Second, nil)
			if field.MatchString(fix) {
				t.Errorf("%s, %s: %s", s.Name, name, fix)
			}
			if field.MatchString(subject{reference: true}.fixFor(s, o, mismatches, 10*time.Second, nil)) {
				named++
			}
		}
	}
	require.Positive(t, named, "configured, the layer is told which field it does not apply")
}
