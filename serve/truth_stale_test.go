package serve

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The truth of the stale-reuse scenarios: what each example client does
// when a kept-alive connection it holds dies between two requests, against
// the raw server of truth_test.go (no faultserver, no serve).

// staleCase is a fault on a kept-alive connection, as the raw server plays
// it on the client's first connection (every later one answers each request
// 200 "ok"), and the calls the client makes.
type staleCase struct {
	// calls are the driver's calls (driver.py's "calls" case): GET, POST,
	// POSTK (a POST with an Idempotency-Key), GATE (a wait for the server's
	// own close, through another client), WAIT (6 s idle, the same way).
	calls string
	// bound is the client's read bound in ms: 200 where the connection goes
	// dark, else 5 s, which no case reaches.
	bound int
	// first is the plan of the first connection's requests by their order
	// on it (truthServer.plan); "ok" where absent.
	first map[int]string
}

var staleCases = map[string]staleCase{
	// The server closes (FIN, RST) the kept-alive connection as the next
	// request arrives, reading none of it.
	"fin-unread-get":  {"GET GET", 5000, map[int]string{2: "fin-unread"}},
	"rst-unread-get":  {"GET GET", 5000, map[int]string{2: "rst-unread"}},
	"fin-unread-post": {"GET POST", 5000, map[int]string{2: "fin-unread"}},
	"rst-unread-post": {"GET POST", 5000, map[int]string{2: "rst-unread"}},
	// The server reads the POST (commits it), then closes: FIN or RST.
	"fin-read-post":  {"GET POST", 5000, map[int]string{2: "close"}},
	"rst-read-post":  {"GET POST", 5000, map[int]string{2: "reset"}},
	"fin-read-postk": {"GET POSTK", 5000, map[int]string{2: "close"}},
	"rst-read-postk": {"GET POSTK", 5000, map[int]string{2: "reset"}},
	// The connection goes dark after the warm-up; the second call meets
	// the read bound; which connection does the third use?
	"dark": {"GET GET GET", 200, map[int]string{2: "dark"}},
	// A keep-alive limit of 3, announced (Connection: close) and silent
	// (the server's FIN after the 3rd response; the client waits for it).
	"limit-announced": {"GET GET GET GET", 5000, map[int]string{3: "ok-close"}},
	"limit-silent":    {"GET GET GET GATE GET", 5000, map[int]string{3: "ok-fin"}},
	// The server closes the connection idle for 250 ms after the warm-up;
	// the client waits for that close (and a second for its own), then
	// sends.
	"idle": {"GET GATE GET", 5000, map[int]string{1: "ok-idle"}},
	// The client's own idle timeout: it waits 6 s (WAIT), then sends;
	// the server never closes. Did it close the connection meanwhile, or
	// at the next request, or reuse it?
	"keep-6s": {"GET WAIT GET", 5000, nil},
}

var staleOrder = []string{"fin-unread-get", "rst-unread-get", "fin-unread-post", "rst-unread-post", "fin-read-post",
	"rst-read-post", "fin-read-postk", "rst-read-postk", "dark", "limit-announced", "limit-silent", "idle", "keep-6s"}

// staleCmd returns the command that makes client's calls of kase.
func staleCmd(t *testing.T, client string, kase staleCase, url, gate string) *exec.Cmd {
	t.Helper()
	root, _ := filepath.Abs("..")
	env := []string{"TRUTH_CALLS=" + kase.calls, "TRUTH_GATE=" + gate, "TRUTH_BOUND_MS=" + strconv.Itoa(kase.bound)}
	switch client {
	case "curl":
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl is not installed (.ci/run installs it)")
		}
		// example.sh's options: none where the policy has no bound,
		// --speed-limit/--speed-time (whole seconds) for a read bound; a
		// --max-time no case reaches. One invocation: one connection
		// cache.
		bound := []string{"--max-time", "5"}
		if kase.bound < 5000 {
			bound = append(bound, "--speed-limit", "1", "--speed-time", "1")
		}
		var args []string
		for i, c := range strings.Fields(kase.calls) {
			if i > 0 {
				args = append(args, "--next")
			}
			switch c {
			case "GATE":
				args = append(args, "-s", "-o", "/dev/null", "--max-time", "15", gate)
				continue
			case "WAIT":
				args = append(args, "-s", "-o", "/dev/null", "--max-time", "15", gate+"?wait=6s")
				continue
			case "POST":
				args = append(args, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", `{"order":7}`)
			case "POSTK":
				args = append(args, "-X", "POST", "-H", "Content-Type: application/json", "-H", "Idempotency-Key: order-7",
					"--data-binary", `{"order":7}`)
			}
			args = append(args, "-s", "-o", "/dev/null", "-w", "%{http_code} %{exitcode}\n")
			args = append(args, bound...)
			args = append(args, url)
		}
		return exec.Command("curl", args...)
	case "requests", "httpx":
		cmd := exec.Command(pythonPath(t, root), filepath.Join("testdata", "truth", "driver.py"), client, "calls", url)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	case "fetch", "axios":
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip("node is not installed (.ci/run installs it)")
		}
		cmd := exec.Command("node", filepath.Join("testdata", "truth", "driver.mjs"), client, "calls", url)
		// The kit lets a 0 ms timer pass between two calls: undici gives
		// a connection back to its pool only a turn after a response.
		cmd.Env = append(os.Environ(), append(env, "CONNAUDIT_NODE_KIT="+nodeKit(t, root), "TRUTH_TURN=1")...)
		return cmd
	}
	t.Fatalf("unknown client %s", client)
	return nil
}

// measureStale runs client on the stale case kase against a fresh raw
// server.
func measureStale(t *testing.T, client, kase string) measured {
	t.Helper()
	sc := staleCases[kase]
	s := &truthServer{plan: func(n, onConn int) string {
		if a := sc.first[onConn]; n == 1 && a != "" {
			return a
		}
		return "ok"
	}}
	m := s.run(t, client, kase, func(url, gate string) *exec.Cmd { return staleCmd(t, client, sc, url, gate) })
	if client == "curl" {
		for i, l := range m.caller {
			m.caller[i] = curlCode(l)
		}
	}
	return m
}

// staleTruth is a pinned measurement of a stale case: truth's, the POSTs
// the server read and the requests it left unread.
type staleTruth struct {
	truth
	posts, unread int
}

func (p staleTruth) check(m measured) error {
	err := p.truth.check(m)
	var bad []string
	if err != nil {
		bad = append(bad, err.Error())
	}
	if m.posts != p.posts {
		bad = append(bad, fmt.Sprintf("POSTs read %d, pinned %d", m.posts, p.posts))
	}
	if m.unread != p.unread {
		bad = append(bad, fmt.Sprintf("unread %d, pinned %d", m.unread, p.unread))
	}
	if bad == nil {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(bad, "; "))
}

// TestTruthStale runs each example client, the real one, on each stale
// case against the raw server and checks what it did against the pinned
// counts. CONNAUDIT_MEASURE=1 logs every measurement; CONNAUDIT_MEASURE_RUNS=N
// runs each case N times and logs how often each distinct measurement
// came.
func TestTruthStale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients")
	}
	beside(t)
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("CONNAUDIT_MEASURE_RUNS")); err == nil && n > 1 {
		runs = min(n, 100)
	}
	for _, client := range []string{"curl", "requests", "httpx", "fetch", "axios"} {
		t.Run(client, func(t *testing.T) {
			for _, kase := range staleOrder {
				p, ok := pinnedStale[client][kase]
				seen := map[string]int{}
				var order []string
				for range runs {
					m := measureStale(t, client, kase)
					k := portRE.ReplaceAllString(m.String(), "port=N") // the listener's port is new each run
					if seen[k] == 0 {
						order = append(order, k)
					}
					seen[k]++
					if !ok {
						t.Errorf("%s on %s: nothing pinned; measured: %s", client, kase, m)
					} else if err := p.check(m); err != nil {
						t.Errorf("%s on %s: %v\nmeasured: %s", client, kase, err, m)
					}
				}
				if os.Getenv("CONNAUDIT_MEASURE") != "" {
					for _, k := range order {
						t.Logf("%-8s %-16s %d/%d: %s", client, kase, seen[k], runs, k)
					}
				}
			}
		})
	}
}

var portRE = regexp.MustCompile(`port=\d+`)

// st is a pinned stale case: the caller's lines (prefixes), requests,
// requests per connection, closes, POSTs read, requests left unread.
func st(caller []string, requests int, conns []int, closed []string, posts, unread int) staleTruth {
	return staleTruth{truth{caller, requests, conns, closed}, posts, unread}
}

// Shorthands of the pins.
var (
	ok2        = []string{"status 200", "status 200"}
	ok4        = []string{"status 200", "status 200", "status 200", "status 200"}
	warmOnly   = []int{1}
	warmAndNew = []int{1, 1}
	srv        = []string{"server"}
	srvThenFin = []string{"server", "client-fin"}
	finFin     = []string{"client-fin", "client-fin"}
)

// pinnedStale are the measurements of the example clients (the versions
// of pinned) on the stale cases, each the same in 20 runs or more but where
// said (CONNAUDIT_MEASURE=1 CONNAUDIT_MEASURE_RUNS=20).
var pinnedStale = map[string]map[string]staleTruth{
	"curl": {
		// curl sends a request again on a new connection when its reused
		// one dies before any response byte, GET or POST alike: safe where
		// the server read none of it (posts 1), a POST written twice
		// where it had (posts 2), with an Idempotency-Key or without.
		"fin-unread-get":  st(ok2, 2, warmAndNew, srvThenFin, 0, 1),
		"rst-unread-get":  st(ok2, 2, warmAndNew, srvThenFin, 0, 1),
		"fin-unread-post": st(ok2, 2, warmAndNew, srvThenFin, 1, 1),
		"rst-unread-post": st(ok2, 2, warmAndNew, srvThenFin, 1, 1),
		"fin-read-post":   st(ok2, 3, []int{2, 1}, srvThenFin, 2, 0),
		"rst-read-post":   st(ok2, 3, []int{2, 1}, srvThenFin, 2, 0),
		"fin-read-postk":  st(ok2, 3, []int{2, 1}, srvThenFin, 2, 0),
		"rst-read-postk":  st(ok2, 3, []int{2, 1}, srvThenFin, 2, 0),
		// --speed-time 1 ends the dark call (exit 28) and curl closes the
		// connection; the next call dials anew.
		"dark":            st([]string{"status 200", "error curl(28)", "status 200"}, 2, warmAndNew, finFin, 0, 1),
		"limit-announced": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		// curl does not see the FIN while idle (it closes its side only
		// at exit) but checks a connection before reusing it: the next
		// call dials anew.
		"limit-silent": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"idle":         st(ok2, 2, warmAndNew, srvThenFin, 0, 0),
		// 6 s idle is below curl's 118 s (CURLOPT_MAXAGE_CONN): reused.
		"keep-6s": st(ok2, 2, []int{2}, []string{"client-fin"}, 0, 0),
	},
	"requests": {
		// urllib3 sends nothing again (Retry(total=0, read=0)): the
		// connection's loss reaches the caller, the server having read
		// the request or not.
		"fin-unread-get": st([]string{"status 200", "error ConnectionError"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-get": st([]string{"status 200", "error ConnectionError"}, 1, warmOnly, srv, 0, 1),
		// An RST as the POST's headers arrive: the caller's error is
		// RemoteDisconnected or ConnectionResetError, as the RST meets
		// the body's write or the response's read (15 and 25 of 40 runs):
		// a ConnectionError either way.
		"fin-unread-post": st([]string{"status 200", "error ConnectionError"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-post": st([]string{"status 200", "error ConnectionError"}, 1, warmOnly, srv, 0, 1),
		"fin-read-post":   st([]string{"status 200", "error ConnectionError"}, 2, []int{2}, srv, 1, 0),
		"rst-read-post":   st([]string{"status 200", "error ConnectionError"}, 2, []int{2}, srv, 1, 0),
		"fin-read-postk":  st([]string{"status 200", "error ConnectionError"}, 2, []int{2}, srv, 1, 0),
		"rst-read-postk":  st([]string{"status 200", "error ConnectionError"}, 2, []int{2}, srv, 1, 0),
		// The read timeout (a ConnectionError wrapping ReadTimeoutError:
		// requests' own class for it) closes the connection.
		"dark":            st([]string{"status 200", "error ConnectionError", "status 200"}, 2, warmAndNew, finFin, 0, 1),
		"limit-announced": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		// urllib3 does not see the FIN while idle; it drops the
		// connection when it takes it from the pool (is_connection_dropped).
		"limit-silent": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"idle":         st(ok2, 2, warmAndNew, srvThenFin, 0, 0),
		// No idle timeout: reused after 6 s.
		"keep-6s": st(ok2, 2, []int{2}, []string{"client-fin"}, 0, 0),
	},
	"httpx": {
		"fin-unread-get":  st([]string{"status 200", "error RemoteProtocolError"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-get":  st([]string{"status 200", "error ReadError"}, 1, warmOnly, srv, 0, 1),
		"fin-unread-post": st([]string{"status 200", "error RemoteProtocolError"}, 1, warmOnly, srv, 0, 1),
		// ReadError (the RST) or RemoteProtocolError (an EOF), as for
		// requests (13 and 27 of 40 runs).
		"rst-unread-post": st([]string{"status 200", "error "}, 1, warmOnly, srv, 0, 1),
		"fin-read-post":   st([]string{"status 200", "error RemoteProtocolError"}, 2, []int{2}, srv, 1, 0),
		"rst-read-post":   st([]string{"status 200", "error ReadError"}, 2, []int{2}, srv, 1, 0),
		"fin-read-postk":  st([]string{"status 200", "error RemoteProtocolError"}, 2, []int{2}, srv, 1, 0),
		"rst-read-postk":  st([]string{"status 200", "error ReadError"}, 2, []int{2}, srv, 1, 0),
		"dark":            st([]string{"status 200", "error ReadTimeout", "status 200"}, 2, warmAndNew, finFin, 0, 1),
		"limit-announced": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"limit-silent":    st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"idle":            st(ok2, 2, warmAndNew, srvThenFin, 0, 0),
		// keepalive_expiry 5 s: not closed while idle, but closed at the
		// next request, which dials anew.
		"keep-6s": st(ok2, 2, warmAndNew, finFin, 0, 0),
	},
	"fetch": {
		// With a 0 ms timer between calls, undici reuses the warm-up's
		// connection; it sends nothing again.
		"fin-unread-get":  st([]string{"status 200", "error TypeError: fetch failed (UND_ERR_SOCKET)"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-get":  st([]string{"status 200", "error TypeError: fetch failed (ECONNRESET)"}, 1, warmOnly, srv, 0, 1),
		"fin-unread-post": st([]string{"status 200", "error TypeError: fetch failed (UND_ERR_SOCKET)"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-post": st([]string{"status 200", "error TypeError: fetch failed (ECONNRESET)"}, 1, warmOnly, srv, 0, 1),
		"fin-read-post":   st([]string{"status 200", "error TypeError: fetch failed (UND_ERR_SOCKET)"}, 2, []int{2}, srv, 1, 0),
		"rst-read-post":   st([]string{"status 200", "error TypeError: fetch failed (ECONNRESET)"}, 2, []int{2}, srv, 1, 0),
		"fin-read-postk":  st([]string{"status 200", "error TypeError: fetch failed (UND_ERR_SOCKET)"}, 2, []int{2}, srv, 1, 0),
		"rst-read-postk":  st([]string{"status 200", "error TypeError: fetch failed (ECONNRESET)"}, 2, []int{2}, srv, 1, 0),
		"dark":            st([]string{"status 200", "error TimeoutError", "status 200"}, 2, warmAndNew, finFin, 0, 1),
		"limit-announced": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"limit-silent":    st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"idle":            st(ok2, 2, warmAndNew, srvThenFin, 0, 0),
		// keepAliveTimeout 4 s: undici closed the idle connection itself.
		"keep-6s": st(ok2, 2, warmAndNew, finFin, 0, 0),
	},
	"axios": {
		"fin-unread-get":  st([]string{"status 200", "error Error: socket hang up"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-get":  st([]string{"status 200", "error Error: read ECONNRESET"}, 1, warmOnly, srv, 0, 1),
		"fin-unread-post": st([]string{"status 200", "error Error: socket hang up"}, 1, warmOnly, srv, 0, 1),
		"rst-unread-post": st([]string{"status 200", "error Error: read ECONNRESET"}, 1, warmOnly, srv, 0, 1),
		"fin-read-post":   st([]string{"status 200", "error Error: socket hang up"}, 2, []int{2}, srv, 1, 0),
		"rst-read-post":   st([]string{"status 200", "error Error: read ECONNRESET"}, 2, []int{2}, srv, 1, 0),
		"fin-read-postk":  st([]string{"status 200", "error Error: socket hang up"}, 2, []int{2}, srv, 1, 0),
		"rst-read-postk":  st([]string{"status 200", "error Error: read ECONNRESET"}, 2, []int{2}, srv, 1, 0),
		"dark":            st([]string{"status 200", "error AxiosError: timeout of 200ms exceeded", "status 200"}, 2, warmAndNew, finFin, 0, 1),
		"limit-announced": st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"limit-silent":    st(ok4, 4, []int{3, 1}, srvThenFin, 0, 0),
		"idle":            st(ok2, 2, warmAndNew, srvThenFin, 0, 0),
		// http.Agent with no timeout: reused after 6 s.
		"keep-6s": st(ok2, 2, []int{2}, []string{"client-fin"}, 0, 0),
	},
}
