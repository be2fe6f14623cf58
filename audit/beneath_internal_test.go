package audit

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
)

// A POST whose body went after its headers (a RoundTripper that wraps the
// body, as otelhttp does, so that net/http does not hold it in memory)
// meets its connection closed beneath it by net/http, which read the
// server's close first: the caller's error is "use of closed network
// connection", and the loss is the server's close, as the fault made it.
// Which side of net/http notices first is a race; the verdict must not be.
func TestClosedBeneathIsTheServersClose(t *testing.T) {
	beneath := &net.OpError{Op: "readfrom", Net: "tcp", Err: &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}}
	for _, tc := range []struct {
		scenario string
		class    httptrace.Class
	}{
		{"stale-post-close-before-read", httptrace.ClassServerClosed},
		{"stale-post-key-before-read", httptrace.ClassServerClosed},
		{"stale-post-reset-before-read", httptrace.ClassReset},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			var s Scenario
			for _, c := range Catalogue() {
				if c.Name == tc.scenario {
					s = c
				}
			}
			require.Equal(t, tc.scenario, s.Name)
			tl := &httptrace.Timeline{Outcome: httptrace.Outcome{Class: httptrace.ClassError, Stage: httptrace.StageWrite, Err: beneath}}
			obs := Observed{Class: httptrace.ClassError, Stage: httptrace.StageWrite, ClientAttempts: 1, Unread: 1, Timeline: tl, Recovered: true}
			closedBeneath(s, &obs)
			require.Equal(t, tc.class, obs.Class)
			// Judged by the loss the scenario allows, with connections
			// unseen (an opaque RoundTripper's): no mismatch.
			exp := s.Expect
			exp.Dials, exp.Fate = nil, nil
			alt, ok := exp.OrExpect()
			if exp.Class == tc.class {
				alt = exp
			} else {
				require.True(t, ok)
			}
			alt.Dials, alt.Fate = nil, nil
			require.Empty(t, compare(alt, obs))

			// Not when the server closed nothing unread, nor for another error.
			other := Observed{Class: httptrace.ClassError, Stage: httptrace.StageWrite, ClientAttempts: 1, Timeline: tl}
			closedBeneath(s, &other)
			require.Equal(t, httptrace.ClassError, other.Class)
			tl2 := &httptrace.Timeline{Outcome: httptrace.Outcome{Class: httptrace.ClassError, Err: net.UnknownNetworkError("x")}}
			other = Observed{Class: httptrace.ClassError, Unread: 1, Timeline: tl2}
			closedBeneath(s, &other)
			require.Equal(t, httptrace.ClassError, other.Class)
		})
	}
}
