package serve

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// truth is what one client did on one case, as pinned: the caller's lines
// (each a prefix of what the driver printed), the requests the server saw,
// the requests on each connection, and how each connection closed.
type truth struct {
	caller   []string
	requests int
	conns    []int
	closed   []string
}

// pinned are the measurements of the example clients (curl 7.88.1,
// requests 2.34.2 with urllib3 2.8.0, httpx 0.28.1, Node 20's fetch,
// axios 1.13.2 with axios-retry 4.5.0) on the catalogue's faults, each
// with a bound of 200 ms where the fault stalls (5 s elsewhere) and, on the
// retry cases, 2 retries as the client's own retry rules allow them.
var pinned = map[string]map[string]truth{
	"curl": {
		"stall":       {[]string{"error curl(28)"}, 1, []int{1}, []string{"client-fin"}},
		"503-503-200": {[]string{"status 200"}, 3, []int{3}, []string{"client-fin"}},
		"disconnect":  {[]string{"error curl(52)"}, 1, []int{1}, []string{"server"}},
		// curl replays the request that died on a kept-alive
		// connection, on a new one: 3 requests for 2 calls, a hidden
		// retry.
		"keepalive-disconnect": {[]string{"status 200", "status 200"}, 3, []int{2, 1}, []string{"server", "client-fin"}},
		"reset":                {[]string{"error curl(56)"}, 1, []int{1}, []string{"server"}},
		"truncate":             {[]string{"error curl(18)"}, 1, []int{1}, []string{"server"}},
		// --retry replays a POST on 503.
		"post-503":    {[]string{"status 503"}, 3, []int{3}, []string{"client-fin"}},
		"500-retry":   {[]string{"status 500"}, 3, []int{3}, []string{"client-fin"}},
		"stall-retry": {[]string{"error curl(28)"}, 3, []int{1, 1, 1}, []string{"client-fin", "client-fin", "client-fin"}},
	},
	"requests": {
		"stall":                {[]string{"error ReadTimeout"}, 1, []int{1}, []string{"client-fin"}},
		"503-503-200":          {[]string{"status 200"}, 3, []int{3}, []string{"client-fin"}},
		"disconnect":           {[]string{"error ConnectionError"}, 1, []int{1}, []string{"server"}},
		"keepalive-disconnect": {[]string{"status 200", "error ConnectionError"}, 2, []int{2}, []string{"server"}},
		"reset":                {[]string{"error ConnectionError"}, 1, []int{1}, []string{"server"}},
		"truncate":             {[]string{"error ChunkedEncodingError"}, 1, []int{1}, []string{"server"}},
		// urllib3 Retry's default allowed_methods leave POST out.
		"post-503":  {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		"500-retry": {[]string{"status 500"}, 1, []int{1}, []string{"client-fin"}},
		// urllib3 Retry(total=2, status_forcelist=[503]) retries a read
		// timeout too (read=None falls back on total): read=0 stops it.
		"stall-retry": {[]string{"error ConnectionError"}, 3, []int{1, 1, 1}, []string{"client-fin", "client-fin", "client-fin"}},
	},
	"httpx": {
		"stall":                {[]string{"error ReadTimeout"}, 1, []int{1}, []string{"client-fin"}},
		"503-503-200":          {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		"disconnect":           {[]string{"error RemoteProtocolError"}, 1, []int{1}, []string{"server"}},
		"keepalive-disconnect": {[]string{"status 200", "error RemoteProtocolError"}, 2, []int{2}, []string{"server"}},
		"reset":                {[]string{"error ReadError"}, 1, []int{1}, []string{"server"}},
		"truncate":             {[]string{"error RemoteProtocolError"}, 1, []int{1}, []string{"server"}},
		"post-503":             {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		"500-retry":            {[]string{"status 500"}, 1, []int{1}, []string{"client-fin"}},
		"stall-retry":          {[]string{"error ReadTimeout"}, 1, []int{1}, []string{"client-fin"}},
	},
	"fetch": {
		"stall":       {[]string{"error TimeoutError"}, 1, []int{1}, []string{"client-fin"}},
		"503-503-200": {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		"disconnect":  {[]string{"error TypeError: fetch failed (UND_ERR_SOCKET)"}, 1, []int{1}, []string{"server"}},
		// undici sends the second call on a new connection: the kept-alive
		// one is not reused right after its response, so nothing dies
		// under it.
		"keepalive-disconnect": {[]string{"status 200", "status 200"}, 2, []int{1, 1}, []string{"client-fin", "client-fin"}},
		"reset":                {[]string{"error TypeError: fetch failed (ECONNRESET)"}, 1, []int{1}, []string{"server"}},
		"truncate":             {[]string{"error TypeError: terminated"}, 1, []int{1}, []string{"server"}},
		"post-503":             {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		"500-retry":            {[]string{"status 500"}, 1, []int{1}, []string{"client-fin"}},
		"stall-retry":          {[]string{"error TimeoutError"}, 1, []int{1}, []string{"client-fin"}},
	},
	"axios": {
		"stall":                {[]string{"error AxiosError: timeout of 200ms exceeded"}, 1, []int{1}, []string{"client-fin"}},
		"503-503-200":          {[]string{"status 200"}, 3, []int{3}, []string{"client-fin"}},
		"disconnect":           {[]string{"error Error: socket hang up"}, 1, []int{1}, []string{"server"}},
		"keepalive-disconnect": {[]string{"status 200", "error Error: socket hang up"}, 2, []int{2}, []string{"server"}},
		"reset":                {[]string{"error Error: read ECONNRESET"}, 1, []int{1}, []string{"server"}},
		"truncate":             {[]string{"error AxiosError: stream has been aborted"}, 1, []int{1}, []string{"server"}},
		// axios-retry's default condition: a POST is not idempotent.
		"post-503": {[]string{"status 503"}, 1, []int{1}, []string{"client-fin"}},
		// axios-retry's default condition retries a 5xx of an idempotent
		// request, not a timeout (ECONNABORTED).
		"500-retry":   {[]string{"status 500"}, 3, []int{3}, []string{"client-fin"}},
		"stall-retry": {[]string{"error AxiosError: timeout of 200ms exceeded"}, 1, []int{1}, []string{"client-fin"}},
	},
}

var truthOrder = []string{"stall", "503-503-200", "disconnect", "keepalive-disconnect", "reset", "truncate", "post-503",
	"500-retry", "stall-retry"}

// TestTruth runs each example client, the real one, on each of the
// catalogue's faults against a raw-socket server and checks what it did
// against the pinned counts. CONNAUDIT_MEASURE=1 prints every measurement.
func TestTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients")
	}
	beside(t)
	for _, client := range []string{"curl", "requests", "httpx", "fetch", "axios"} {
		t.Run(client, func(t *testing.T) {
			for _, kase := range truthOrder {
				m := measure(t, client, kase)
				if client == "curl" {
					for i, l := range m.caller {
						m.caller[i] = curlCode(l)
					}
				}
				if os.Getenv("CONNAUDIT_MEASURE") != "" {
					t.Logf("%-8s %-21s %s", client, kase, m)
				}
				if err := pinned[client][kase].check(m); err != nil {
					t.Errorf("%s on %s: %v\nmeasured: %s", client, kase, err, m)
				}
			}
		})
	}
}

func (p truth) check(m measured) error {
	var bad []string
	if len(m.caller) != len(p.caller) {
		bad = append(bad, fmt.Sprintf("caller got %d outcomes, pinned %d", len(m.caller), len(p.caller)))
	} else {
		for i := range p.caller {
			if !strings.HasPrefix(m.caller[i], p.caller[i]) {
				bad = append(bad, fmt.Sprintf("caller %d: %q, pinned %q", i+1, m.caller[i], p.caller[i]))
			}
		}
	}
	if m.requests != p.requests {
		bad = append(bad, fmt.Sprintf("requests %d, pinned %d", m.requests, p.requests))
	}
	if !slices.Equal(m.conns, p.conns) {
		bad = append(bad, fmt.Sprintf("requests per connection %v, pinned %v", m.conns, p.conns))
	}
	if !slices.Equal(m.closed, p.closed) {
		bad = append(bad, fmt.Sprintf("closes %v, pinned %v", m.closed, p.closed))
	}
	if bad == nil {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(bad, "; "))
}
