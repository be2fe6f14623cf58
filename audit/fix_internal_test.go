package audit

import (
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/pool"
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

// TestFixNamesTheSettingThatKeptNoConnection: when a transport's setting
// kept a request from the kept-alive connection a scenario needs (keep-alives
// off, a negative MaxIdleConnsPerHost, an idle timeout shorter than the gap),
// the fix names that setting: not the retry layer for the extra dials, not
// "no transport setting" for a hidden retry that needs a reused connection,
// not a header bound or a health check for a fault the request never met
// on a connection it did not reuse. With no such close, the layer is still
// told what it did.
func TestFixNamesTheSettingThatKeptNoConnection(t *testing.T) {
	byName := map[string]Scenario{}
	for _, s := range Catalogue() {
		byName[s.Name] = s
	}
	dka := describe(&http.Transport{DisableKeepAlives: true})
	noIdle := describe(&http.Transport{MaxIdleConnsPerHost: -1})
	tiny := describe(&http.Transport{IdleConnTimeout: 90})
	const (
		fixDKA    = "DisableKeepAlives closes every connection after one request"
		fixNoIdle = "MaxIdleConnsPerHost -1 keeps no idle connection"
		fixIdle   = "IdleConnTimeout (yours: 90ns) closed the connection before it was reused"
	)
	closedFor := func(r pool.CloseReason) Fate { return Fate{ClosedBy: pool.ClosedByClient, Reason: r} }
	as := func(name string, edit func(o *Observed)) (Scenario, Observed) {
		s, ok := byName[name]
		require.True(t, ok, name)
		e := s.Expect
		o := Observed{ClientAttempts: e.ClientAttempts, ServerRequests: e.ServerRequests, HiddenRetry: e.HiddenRetry,
			Class: e.Class, Stage: e.Stage, Status: e.Status, CancelObserved: e.CancelObserved, Recovered: true}
		if e.Dials != nil {
			o.Dials = *e.Dials
		}
		if e.Fate != nil {
			o.Fate = *e.Fate
		}
		edit(&o)
		return s, o
	}
	for _, c := range []struct {
		name, scenario string
		sub            subject
		edit           func(o *Observed)
		want, notWant  string
	}{
		{"extra dials of a retry contract, no idle connection kept", "retry/503-503-ok", noIdle, func(o *Observed) {
			o.Dials, o.Fate, o.lost = 3, closedFor(pool.ReasonKeepAlivesOff), []pool.CloseReason{pool.ReasonKeepAlivesOff}
		}, fixNoIdle, "retry layer"},
		{"extra dial of an attempt that failed as it should, keep-alives off", "retry/attempt-deadline", dka, func(o *Observed) {
			o.Dials, o.lost = 2, []pool.CloseReason{pool.ReasonKeepAlivesOff}
		}, fixDKA, "retry layer"},
		{"extra dials, the idle timeout shorter than the delay", "retry/503-503-ok", tiny, func(o *Observed) {
			o.Dials, o.lost = 3, []pool.CloseReason{pool.ReasonIdleTimeout}
		}, fixIdle, "retry layer"},
		{"no hidden retry without a reused connection", "hidden-retry", noIdle, func(o *Observed) {
			o.ServerRequests, o.HiddenRetry, o.Fate = 1, false, closedFor(pool.ReasonKeepAlivesOff)
			o.lost = []pool.CloseReason{pool.ReasonKeepAlivesOff}
		}, fixNoIdle, "no transport setting explains this"},
		{"a connection gone dark never reused", "go-dark", dka, func(o *Observed) {
			o.Class, o.Stage, o.ServerRequests, o.Dials = httptrace.ClassOK, httptrace.StageBody, 1, 2
			o.Fate, o.lost = closedFor(pool.ReasonKeepAlivesOff), []pool.CloseReason{pool.ReasonKeepAlivesOff}
		}, fixDKA, "ResponseHeaderTimeout"},
		{"an HTTP/2 connection gone dark never reused", "h2/go-dark", dka, func(o *Observed) {
			o.Class, o.Stage, o.ServerRequests, o.Dials = httptrace.ClassOK, httptrace.StageBody, 1, 2
			o.Fate, o.lost = closedFor(pool.ReasonKeepAlivesOff), []pool.CloseReason{pool.ReasonKeepAlivesOff}
		}, fixDKA, "health check"},
		{"the layer's own extra attempts, every connection kept", "retry/503-503-ok", noIdle, func(o *Observed) {
			o.ClientAttempts, o.ServerRequests, o.Dials = 5, 5, 1
		}, "MaxRetries", "MaxIdleConnsPerHost"},
	} {
		s, o := as(c.scenario, c.edit)
		mismatches := verdicts(s, c.sub, o, compare(s.Expect, o))
		require.NotEmpty(t, mismatches, c.name)
		fix := c.sub.fixFor(s, o, mismatches, 10*time.Second, nil)
		require.Contains(t, fix, c.want, "%s: %q", c.name, mismatches)
		require.NotContains(t, fix, c.notWant, "%s: %q", c.name, mismatches)
	}
}
