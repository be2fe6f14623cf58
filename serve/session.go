package serve

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/faultserver"
	"github.com/connaudit/connaudit/internal/loopback"
	"github.com/connaudit/connaudit/internal/notify"
)

// maxIdleTimeoutMS bounds a client's idle timeout as a kit declares it: a
// day, longer than any a client sets.
const maxIdleTimeoutMS = 24 * 60 * 60 * 1000

// session is one kit's audit of one client. Its id, kit, client,
// protocols, start, spec and srv do not change once it is open; the rest,
// and the connections attributed to it (connRec), are guarded by mu.
type session struct {
	id        string
	kit       string
	client    Client
	terms     map[term]string // the kit's declaration, validated: client.terms
	protocols []string
	started   time.Time
	srv       *Server

	mu        sync.Mutex
	touched   time.Time
	states    []*scenarioState
	stall     *faultserver.TLSStall
	hang      *faultserver.ConnectHang
	ports     []func()   // release the closed ports its scenarios hold
	conns     []*connRec // attributed to the session, at most maxConnsPerSession
	extraConn int        // connections beyond that, counted only
	reqs      int        // requests recorded in detail
	extraReqs int        // beyond maxReqsPerSession, counted only
	fetched   bool
	done      bool
	changes   notify.Changes
}

// scenarioState is what the server saw of one scenario in one session.
type scenarioState struct {
	idx       int
	sp        *spec
	spec      ScenarioSpec // as the kit gets it
	faultPath string
	okPath    string
	holdPath  string
	warmPath  string
	fault     []reqRec // requests for the faulted URL, warm-up included
	ok        []reqRec
	hold      []reqRec
	guard     *time.Timer
	guardFrom time.Time // when the guard started
	fromReq   bool      // the guard runs from the first faulted request
	cut       bool      // the guard fired: the server cut the scenario
	cutAt     time.Time
	report    *KitReport
	result    *Result
	// closed is the kept-alive connection the server closed at the kit's
	// asking (close_url); clientClosed whether the client had closed its
	// side when the server answered.
	closed       *connRec
	clientClosed bool
	// openAtSettle is the connection settle_url waited on when the client
	// had not closed it by the settle's answer: its fate is as of then (a
	// process that exits later closes it all the same, after /ok).
	openAtSettle *connRec
}

// reqRec is a request the server read.
type reqRec struct {
	conn *connRec
	at   time.Time
}

// connRec is a connection of a fault listener, attributed to the session
// of the first request it carried: which session is guarded by the
// server's mutex; the rest, once attributed, by the session's.
type connRec struct {
	ref      connRef
	accepted time.Time
	se       *session
	scenario int // index of the first scenario it served
	last     int // and of the last
	requests int
	// unread counts the reads of bytes the server did not read as a
	// request: sent on a connection it was closing, or gone dark.
	unread      int
	firstUnread time.Time // when it was first
	lastReq     time.Time
	firstReq    time.Time
	closed      bool
	closedBy    string
	how         string
	closedAt    time.Time
}

// guardFor is how long the server lets a faulted call run before it cuts
// it: three times the scenario's inherent wait plus two seconds, at least
// eight (a client's timers of whole seconds, curl's, fit in it), and for a
// retry contract eight seconds past its total budget: a client that holds
// the policy has ended the call by then, and one whose retries outlast the
// budget by an attempt (curl's --retry-max-time lets the last one start
// late) ends it by itself, with all its requests counted.
func guardFor(sp *spec) time.Duration {
	g := max(8*time.Second, 3*sp.wait+2*time.Second)
	if sp.Contract != "" && sp.policy.TotalTimeoutMS > 0 {
		g = max(g, time.Duration(sp.policy.TotalTimeoutMS*float64(time.Millisecond))+8*time.Second)
	}
	if sp.on >= onTLSStall {
		g = max(g, belowHTTPGuard)
	}
	return g
}

// lateBound is how late after a scenario's own bound a timeout may come
// and still be that bound's: ten times it and a second (a client whose
// timers count whole seconds, curl's, fits), far from a bound that fired.
func lateBound(sp *spec) time.Duration {
	b := sp.policy.ReadTimeoutMS
	if sp.Contract == "" || b == 0 {
		b = max(b, sp.policy.AttemptTimeoutMS, sp.policy.ConnectTimeoutMS, sp.policy.TLSTimeoutMS, sp.policy.PoolAcquireTimeoutMS)
	}
	if b == 0 {
		return 0
	}
	return 10*time.Duration(b*float64(time.Millisecond)) + time.Second
}

// holdFor is how long the hold of a second-caller scenario lasts.
func holdFor(sp *spec) time.Duration {
	return time.Duration(sp.policy.PoolAcquireTimeoutMS*float64(time.Millisecond)) + time.Second
}

// sessionID returns a new session's id: its number and 128 random bits,
// which no one guesses (the fault listeners' paths carry it).
func sessionID(n int) string {
	var b [16]byte
	rand.Read(b[:])
	return fmt.Sprintf("s%d-%s", n, hex.EncodeToString(b[:]))
}

// open creates a session for req, or says why not.
func (s *Server) open(req OpenRequest) (*session, error) {
	if req.Protocol != Protocol {
		return nil, badRequest("protocol %q is not spoken here; this server speaks %q", req.Protocol, Protocol)
	}
	if req.Client.Name == "" {
		return nil, badRequest("client.name is empty: name the client under test")
	}
	for _, f := range []struct{ name, v string }{{"kit", req.Kit}, {"client.name", req.Client.Name},
		{"client.version", req.Client.Version}, {"client.config", req.Client.Config}} {
		if len(f.v) > maxName {
			return nil, badRequest("%s is longer than %d bytes", f.name, maxName)
		}
	}
	if v := req.Client.IdleTimeoutMS; v != nil && (math.IsNaN(*v) || *v < 0 || *v > maxIdleTimeoutMS) {
		return nil, badRequest("client.idle_timeout_ms is not in 0..%g", float64(maxIdleTimeoutMS))
	}
	terms, err := termsOf(req.Client.Terms)
	if err != nil {
		return nil, err
	}
	protos := req.Protocols
	if len(protos) == 0 {
		protos = []string{string(audit.HTTP1)}
	}
	for _, p := range protos {
		if p != string(audit.HTTP1) && p != string(audit.HTTP2) {
			return nil, badRequest("protocol %q is not %q or %q", p, audit.HTTP1, audit.HTTP2)
		}
	}
	run, err := compile("run", req.Run)
	if err != nil {
		return nil, err
	}
	skip, err := compile("skip", req.Skip)
	if err != nil {
		return nil, err
	}
	var chosen []*spec
	for _, sp := range s.specs {
		switch {
		case !slices.Contains(protos, string(sp.Proto)),
			run != nil && !run.MatchString(sp.Name), skip != nil && skip.MatchString(sp.Name),
			s.cfg.run != nil && !s.cfg.run.MatchString(sp.Name), s.cfg.skip != nil && s.cfg.skip.MatchString(sp.Name):
			continue
		}
		chosen = append(chosen, sp)
	}
	if len(chosen) == 0 {
		return nil, badRequest("no scenario is selected for protocols %v, run %q, skip %q", protos, req.Run, req.Skip)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, &apiErr{code: 503, msg: "the server is stopping"}
	}
	if len(s.sessions) >= maxSessions {
		s.mu.Unlock()
		return nil, &apiErr{code: 429, msg: fmt.Sprintf("%d sessions are open, the most this server holds", maxSessions)}
	}
	s.next++
	now := time.Now()
	se := &session{id: sessionID(s.next), kit: printable(req.Kit), client: Client{Name: printable(req.Client.Name),
		Version: printable(req.Client.Version), Config: printable(req.Client.Config), IdleTimeoutMS: req.Client.IdleTimeoutMS},
		terms: terms, protocols: protos, started: now, touched: now, srv: s}
	s.sessions[se.id] = se
	s.mu.Unlock()

	if err := s.listen(se, chosen); err != nil {
		s.end(se, "setup failed: "+err.Error())
		return nil, &apiErr{code: 500, msg: err.Error()}
	}
	return se, nil
}

func compile(name, pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, badRequest("bad %s pattern: %v", name, err)
	}
	return re, nil
}

// listen registers the session's scenarios on the fault listeners, and
// starts the listeners of its own that some need.
func (s *Server) listen(se *session, chosen []*spec) error {
	var states []*scenarioState
	for i, sp := range chosen {
		st := &scenarioState{idx: i, sp: sp}
		prefix := fmt.Sprintf("/s/%s/%d/", se.id, i)
		st.faultPath, st.okPath, st.holdPath, st.warmPath = prefix+"fault", prefix+"ok", prefix+"hold", prefix+"warm"
		okOn := sp.on
		base := ""
		switch sp.on {
		case onTLSStall:
			if se.stall == nil {
				stall, err := faultserver.NewTLSStall()
				if err != nil {
					return err
				}
				se.stall = stall
			}
			okOn, base = onTLS, se.stall.URL()
		case onConnectHang:
			if se.hang == nil {
				hang, err := faultserver.NewConnectHang()
				if err != nil {
					return err
				}
				se.hang = hang
			}
			okOn, base = onPlain, se.hang.URL()
		case onClosedPort:
			addr, release, err := loopback.ClosedPort()
			if err != nil {
				return err
			}
			se.ports = append(se.ports, release)
			okOn, base = onPlain, "http://"+addr
		default:
			s.faults[sp.on].Handle(st.faultPath, sp.fault)
			base = s.faults[sp.on].URL()
		}
		s.faults[okOn].Handle(st.okPath, faultserver.OK{})
		if sp.Steps == audit.StepsSecondCaller {
			// The hold answers by itself, a second after the second
			// caller must have been refused, so that no kit has to
			// cancel it and /ok then finds the connection free.
			s.faults[okOn].Handle(st.holdPath, faultserver.Status{Code: 200, After: holdFor(sp)})
		}
		okBase := s.faults[okOn].URL()
		ctl := s.URL() + "/v1/sessions/" + se.id
		st.spec = ScenarioSpec{Name: sp.Name, Contract: sp.Contract, Proto: string(sp.Proto), Fault: sp.Fault,
			Steps: sp.Steps, URL: base + st.faultPath, OKURL: okBase + st.okPath, ReadBytes: sp.ReadBytes,
			Request: sp.request, Policy: sp.policy, Expect: sp.caller, GuardMS: ms(guardFor(sp))}
		if sp.Steps.Warmed() {
			st.spec.WarmURL, st.spec.WarmRequests = st.spec.URL, max(1, sp.Warm)
			if sp.WarmAside {
				s.faults[okOn].Handle(st.warmPath, faultserver.OK{})
				st.spec.WarmURL = okBase + st.warmPath
			}
		}
		switch sp.Steps {
		case audit.StepsCancelWhenEntered:
			st.spec.EnteredURL = ctl + "/entered?scenario=" + strconv.Itoa(i)
		case audit.StepsSecondCaller:
			st.spec.HoldURL = okBase + st.holdPath
			st.spec.EnteredURL = ctl + "/entered?scenario=" + strconv.Itoa(i) + "&what=hold"
		}
		if sp.Close != "" {
			st.spec.CloseURL = ctl + "/close?scenario=" + strconv.Itoa(i)
		}
		if sp.Settle {
			st.spec.SettleURL = ctl + "/settle?scenario=" + strconv.Itoa(i)
		}
		states = append(states, st)
	}
	se.mu.Lock()
	se.states = states
	se.mu.Unlock()
	return nil
}

// lookup returns the open session id, touching it.
func (s *Server) lookup(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[id]
	if se == nil && s.ends.ended(id) {
		return nil, sessionDone(id)
	}
	if se == nil {
		return nil, &apiErr{code: 404, msg: fmt.Sprintf("no open session %q", printable(id))}
	}
	se.mu.Lock()
	se.touched = time.Now()
	se.mu.Unlock()
	return se, nil
}
