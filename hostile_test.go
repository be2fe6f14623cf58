package connaudit_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/hostile"
	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/internal/vocab"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/probe"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// hostileBound bounds a request to a hostile server whose reply stalls
// within every other bound: the client's deadline is what ends it. Every
// other request is bounded by hostileGuard, which it must not need.
const (
	hostileBound = 300 * time.Millisecond
	hostileGuard = 5 * time.Second
)

func hostileTimeout(r hostile.Reply) time.Duration {
	if hostileExpect[r.Name] == vocab.ClassDeadline {
		return hostileBound
	}
	return hostileGuard
}

// hostileExpect is the class each hostile reply must get when it is
// deterministic; a reply not listed may get any class but "".
var hostileExpect = map[string]httptrace.Class{
	"garbage":                     vocab.ClassProtocol,
	"empty":                       vocab.ClassServerClosed,
	"truncated-status-line":       vocab.ClassProtocol,
	"huge-headers":                vocab.ClassProtocol,
	"invalid-chunk-size":          vocab.ClassProtocol,
	"short-body":                  vocab.ClassBodyTruncated,
	"negative-content-length":     vocab.ClassProtocol,
	"conflicting-content-lengths": vocab.ClassProtocol,
	"http09":                      vocab.ClassProtocol,
	"1xx-flood":                   vocab.ClassDeadline, // within every bound: the client's deadline ends it
	"1xx-flood-huge":              vocab.ClassProtocol, // over MaxResponseHeaderBytes
	"tls-alert":                   vocab.ClassTLS,
	// reply-before-request: "ok" when the response arrives after the
	// Transport registered the request; "protocol" when before (net/http
	// logs an "Unsolicited response" and gives the connection up).
}

// TestHostileServers sends a request to each broken reply of the corpus
// through the tracer and a pool, then through the probe: nothing panics,
// every outcome is classified, nothing hangs, and every connection the
// server accepted is accounted for and closed.
func TestHostileServers(t *testing.T) {
	// net/http logs bytes a server sends on an idle connection
	// ("Unsolicited response") through the standard logger: the test's
	// log, not a stray line on the run's output.
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(testLog{t})
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })
	for _, reply := range hostile.Corpus() {
		t.Run(reply.Name, func(t *testing.T) {
			t.Run("pool", func(t *testing.T) { hostilePool(t, reply) })
			t.Run("probe", func(t *testing.T) { hostileProbe(t, reply) })
		})
	}
}

func hostilePool(t *testing.T, reply hostile.Reply) {
	base := goleak.IgnoreCurrent()
	srv, err := hostile.New(reply)
	require.NoError(t, err)
	defer srv.Close() // on failure; Close twice is a no-op
	col := &httptrace.Collector{}
	p := newPool(t, col, pool.ConnectTimeout(time.Second), pool.TLSHandshakeTimeout(time.Second))
	defer p.Close()

	ctx, cancel := context.WithTimeout(bounded(t), hostileTimeout(reply))
	defer cancel()
	resp, err := get(ctx, p.Client(), srv.URL()+"/x")
	var n int64
	if err == nil {
		var rerr error
		n, rerr = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		t.Logf("response %s, %d body bytes, read error: %v", resp.Status, n, rerr)
	} else {
		t.Logf("error: %v", err)
	}

	tls := col.Timelines()
	require.Len(t, tls, 1, "one request, one timeline")
	tl := tls[0]
	require.True(t, tl.Finished)
	require.Equal(t, 1, tl.Count(vocab.KindDone), "exactly one outcome")
	require.NotEmpty(t, tl.Outcome.Class)
	require.NotEmpty(t, tl.Outcome.Stage)
	t.Logf("outcome %s @%s (status %d, %d got-1xx, %d dropped events): %v",
		tl.Outcome.Class, tl.Outcome.Stage, tl.Status, tl.Count(vocab.KindGot1xx), tl.Dropped, tl.Outcome.Err)
	if want, ok := hostileExpect[reply.Name]; ok {
		require.Equal(t, want, tl.Outcome.Class, "%s: %v", reply.Name, tl.Outcome.Err)
	} else {
		require.Contains(t, []httptrace.Class{vocab.ClassOK, vocab.ClassProtocol}, tl.Outcome.Class)
	}
	if tl.Outcome.Class == vocab.ClassOK {
		require.EqualValues(t, tl.BodyBytes, n)
	}

	require.NoError(t, p.Check(bounded(t)))
	s := p.Stats()
	require.NoError(t, s.Check())
	require.Zero(t, s.Active)
	require.Zero(t, s.OpenBodies)
	require.Zero(t, s.InFlight)
	require.EqualValues(t, 1, s.Requests)
	require.Equal(t, srv.ConnsAccepted(), s.Dials, "every connection the server accepted was dialed and tracked, and no other")
	require.Zero(t, s.DialErrors)
	for _, c := range p.Conns() {
		t.Logf("conn #%d %s, %d request(s), closed by %s: %s %s", c.ID, c.State, c.Requests, c.ClosedBy, c.CloseReason, c.CloseDetail)
	}
	p.Close()
	require.NoError(t, p.WaitFor(bounded(t), func(s pool.Stats) bool { return s.Open == 0 && s.Dialing == 0 }))
	require.Equal(t, s.Dials, p.Stats().Closed)
	require.NoError(t, srv.Close())
	require.NoError(t, leaks.Name(goleak.Find(base)))
}

func hostileProbe(t *testing.T, reply hostile.Reply) {
	base := goleak.IgnoreCurrent()
	srv, err := hostile.New(reply)
	require.NoError(t, err)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"/x", nil)
	require.NoError(t, err)
	const requests = 3
	rep, err := probe.Run(bounded(t), req, probe.Requests(requests), probe.Timeout(hostileTimeout(reply)), probe.Deadline(2*hostileGuard))
	var unusable *probe.UnusableError
	if err != nil {
		require.True(t, errors.As(err, &unusable), "a probe of a broken server is unusable, not broken: %v", err)
	}
	require.NotNil(t, rep)
	t.Logf("probe: outcomes %v, dials %d, closed by %v, findings %d, failures %+v, err %v", rep.Outcomes, rep.Dials, rep.ClosedBy, len(rep.Findings), rep.Failures, err)
	require.Equal(t, requests, rep.Requests)
	total := 0
	for class, n := range rep.Outcomes {
		require.NotEmpty(t, class)
		total += n
	}
	require.Equal(t, requests, total, "every request has one outcome")
	if want, ok := hostileExpect[reply.Name]; ok {
		require.Equal(t, map[httptrace.Class]int{want: requests}, rep.Outcomes)
	}
	require.Equal(t, srv.ConnsAccepted(), rep.Dials-rep.DialErrors, "every connection the server accepted was dialed by the probe")
	require.NoError(t, srv.Close())
	require.NoError(t, leaks.Name(goleak.Find(base)))
}

// testLog writes what is logged to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
