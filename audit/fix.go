package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/text"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

// stageFix says what bounds stage in an http.Transport and how to set it.
func (sub subject) stageFix(stage httptrace.Stage) string {
	if fix := sub.chainStageFix(stage); fix != "" {
		return fix
	}
	switch stage {
	case httptrace.StageDNS, httptrace.StageConnect:
		if sub.ownDial {
			return "the transport's own DialContext did not end the dial: give its net.Dialer a Timeout " +
				"within the audit's guard deadline (or raise " + nameGuardDeadline + " above it)"
		}
		return "a net.Dialer's Timeout bounds DNS and connect: set DialContext to the DialContext " +
			"of a net.Dialer with a Timeout"
	case httptrace.StageTLS:
		return "set TLSHandshakeTimeout: it bounds the TLS handshake"
	case httptrace.StageAwaitHeaders:
		return "set ResponseHeaderTimeout: it bounds the wait for the response headers"
	case httptrace.StageBody:
		return "no http.Transport field bounds a stalled body: pass connaudit's body-idle watchdog, " +
			nameBodyIdleTimeout + "(d), to " + nameWithTransport + " after the factory (in service, to " + nameTrack + ")"
	case httptrace.StagePoolWait:
		return "no http.Transport field bounds a wait for a connection: give the request a context " +
			"deadline; MaxConnsPerHost caps the connections it waits for"
	case httptrace.StageWrite:
		return "no http.Transport field bounds writing the request: give the request a context deadline"
	}
	return ""
}

// classSetting names the setting whose timeout is the class c, or "".
func classSetting(c httptrace.Class) string {
	switch c {
	case httptrace.ClassResponseHeaderTimeout:
		return "ResponseHeaderTimeout"
	case httptrace.ClassTLSHandshakeTimeout:
		return "TLSHandshakeTimeout"
	case httptrace.ClassConnectTimeout:
		return "net.Dialer.Timeout"
	case httptrace.ClassBodyIdleTimeout:
		return nameBodyIdleTimeout
	}
	return ""
}

// yours says the transport's own value of a bound: "yours: none" or
// "yours: 10s".
func yours(d time.Duration) string {
	if d <= 0 {
		return "yours: none"
	}
	return "yours: " + d.String()
}

// fixes collects fixes, once each, in order.
type fixes []string

func (f *fixes) add(fix string) {
	if fix != "" && !slices.Contains(*f, fix) {
		*f = append(*f, fix)
	}
}

// fixFor says what fixes the failure of scenario s as observed, with the
// guard deadline in force: what bounds the stage in an http.Transport and
// how to set it, what the retry layer must do, or what setting explains
// the connection's fate. beyond is the bound the guard did not wait for,
// being longer than the deadline, if that is what ended the call.
func (sub subject) fixFor(s Scenario, o Observed, mismatches []string, deadline time.Duration, beyond *bound) string {
	var fs fixes
	layer := ""
	if s.Contract != "" {
		layer = layerFix(s, o, sub.retryDefaults)
	}
	lost := sub.reuseFix(s, o, mismatches)
	// A request that got no kept-alive connection missed a fault that
	// lives on one (a connection gone dark, or stale): the setting that
	// kept it from reuse explains what was seen, not a bound of the
	// transport's nor its health check.
	explained := lost != "" && o.Class == httptrace.ClassOK && !o.Unbounded && beyond == nil
	if !explained {
		sub.boundFixes(&fs, s, o, layer, deadline, beyond)
	}
	fs.add(lost)
	sub.fateFixes(&fs, s, o, explained)
	sub.mismatchFixes(&fs, mismatches)
	if len(fs) == 0 && layer == fixReplayPOST && sub.retryDefaults {
		// Not replaying a POST is the safe default: the contract judges
		// a layer told to, which one at its defaults was not.
		fs.add("the layer at its defaults does not replay a POST, the safe default; " + s.Contract +
			" judges one configured to replay it once, as the policy asks: configure that to judge it")
	} else if len(fs) == 0 && layer != "" {
		fs.add(sub.inLayer() + layer)
	}
	if len(fs) == 0 {
		if f := sub.stageFix(s.Expect.Stage); f != "" && classSetting(s.Expect.Class) != "" {
			fs.add(f)
		} else {
			fs.add("no transport setting explains this: -v shows the faulted request's timeline")
		}
	}
	return strings.Join(fs, "; ")
}

// boundFixes says what bounds the stage the call was cut at, or which
// bound ended it where another should have.
func (sub subject) boundFixes(fs *fixes, s Scenario, o Observed, layer string, deadline time.Duration, beyond *bound) {
	e := s.Expect
	switch {
	case beyond != nil:
		fs.add(fmt.Sprintf("%s(%v) waits for the client's %v bound on stage %s to fire; or keep "+
			"that bound within the guard deadline (%v)", nameGuardDeadline, beyond.d, beyond.d, o.UnboundedStage, deadline))
	case o.Unbounded:
		_, own := sub.stageBound(o.UnboundedStage)
		multi := s.Contract != "" && o.ClientAttempts > 1
		if own > 0 && multi {
			// Each attempt ends at the transport's bound; the layer's
			// trying again made the call outlast the guard.
			fs.add(sub.inLayer() + layer)
			return
		}
		if !sub.reference || s.Contract == "" {
			// The reference pool under a retry layer is the catalogue's,
			// not the user's: what the layer must do is the fix.
			fs.add(sub.stageFix(o.UnboundedStage))
		}
		if multi || (s.Contract != "" && s.Policy.AttemptTimeout > 0 && e.Class == httptrace.ClassDeadline) {
			fs.add(sub.inLayer() + layer)
		}
	case sub.tie(s) != "":
		side := "below it, so that a read timeout is told from an attempt timeout"
		if e.Class == httptrace.ClassDeadline {
			side = "above it, so that the attempt limit ends the attempt"
		}
		setting := "ResponseHeaderTimeout"
		if e.Stage == httptrace.StageBody {
			setting = nameBodyIdleTimeout
		}
		fs.add(fmt.Sprintf("set %s well apart from %s: %s", setting, sub.layerLimit(), side))
	case o.ClientAttempts > 0 && o.Class != e.Class && classSetting(e.Class) != "" &&
		sub.kind == kindHTTP2 && e.Stage == httptrace.StageAwaitHeaders:
		// x/net has no ResponseHeaderTimeout to set.
		fs.add(sub.stageFix(e.Stage))
	case o.ClientAttempts > 0 && o.Class != e.Class && classSetting(e.Class) != "":
		_, own := sub.stageBound(e.Stage)
		limits := yours(own)
		if b := sub.bounds(e.Stage); !b.known {
			limits = "yours: unseen, " + b.name + "; audited as an *http.Transport, or through a wrapper " +
				"with an Unwrap method, the contract fits its limit to your bound"
		}
		if s.Contract != "" && s.Policy.AttemptTimeout > 0 && !sub.retryDefaults {
			limits += fmt.Sprintf("; %s: %v", sub.layerLimit(), s.Policy.AttemptTimeout)
		}
		fs.add(fmt.Sprintf("%s must end this request before anything else does: set it below the "+
			"request's own deadline or attempt limit (%s)", classSetting(e.Class), limits))
	case o.ClientAttempts > 0 && o.Class != e.Class && classSetting(o.Class) != "":
		limit := s.Policy.AttemptTimeout
		if name, own := sub.stageBound(o.Stage); s.Contract != "" && limit > 0 && own > limit && layer != "" {
			// The transport's bound is the longer: it fired because the
			// layer's attempt limit did not.
			fs.add(fmt.Sprintf("%s%s: the transport's %s (%v) ended the attempt that the "+
				"attempt limit (%v) should have", sub.inLayer(), layer, name, own, limit))
			return
		}
		fs.add(fmt.Sprintf("the transport's %s ended the request before the bound under audit: "+
			"keep it longer than that", classSetting(o.Class)))
	}
}

// fateFixes names the setting that explains the connection's fate, and a
// hidden retry the scenario did not expect. reused says that a setting
// kept the request from the connection the fault was on ([subject.reuseFix]):
// no health check is then at fault.
func (sub subject) fateFixes(fs *fixes, s Scenario, o Observed, reused bool) {
	if f := s.Expect.Fate; f != nil && f.Reason == pool.ReasonPingTimeout && o.Fate.Reason != pool.ReasonPingTimeout &&
		(!o.Recovered || !o.Unbounded) && o.Beyond == "" && !reused {
		// The dark connection stayed in the pool: nothing checked its
		// health.
		if hc, name := sub.healthCheck(); hc > 0 {
			fs.add(fmt.Sprintf("the Transport's HTTP/2 health check (yours: %s) did not close the connection that "+
				"went dark within %v: -v shows its timeline", name, hc))
		} else if sub.kind == kindHTTP2 {
			fs.add("set the http2.Transport's health check, ReadIdleTimeout and PingTimeout, such as 5s and 5s, " +
				"within the audit's guard deadline: without it x/net keeps a connection that went dark in its pool, " +
				"and every request on it hangs until its own bound")
		} else {
			fs.add("set the Transport's HTTP/2 health check, Transport.HTTP2 = &http.HTTP2Config{SendPingTimeout: …, " +
				"PingTimeout: …} (x/net's ReadIdleTimeout), such as 5s and 5s, within the audit's guard deadline: " +
				"without it net/http keeps a connection that went dark in its pool, and every request on it hangs " +
				"until its own bound")
		}
	}
	if !o.Fate.Reused && o.Fate.ClosedBy != "" {
		fs.add(sub.settingFix(o.Fate.Reason))
	}
	if o.HiddenRetry && !s.Expect.HiddenRetry {
		fs.add("net/http sent a replayable request again on a new connection by itself, which nothing " +
			"turns off: make the endpoint idempotent or send an Idempotency-Key")
	}
}

// mismatchFixes names the fix of the mismatches that have one of their
// own: a protocol not spoken, a cap passed, a layer that went on after its
// context ended, a body left open.
func (sub subject) mismatchFixes(fs *fixes, mismatches []string) {
	for _, m := range mismatches {
		switch {
		case strings.HasPrefix(m, beyondHealthCheck):
			hc, name := sub.healthCheck()
			fs.add(fmt.Sprintf("%s(%v) waits for the HTTP/2 health check (%s); or keep SendPingTimeout + "+
				"PingTimeout within the guard deadline", nameGuardDeadline, hc, name))
		case strings.HasPrefix(m, "not HTTP/2"):
			if sub.fixH2 != "" {
				fs.add(sub.fixH2)
			} else {
				fs.add("net/http spoke HTTP/1 where HTTP/2 was offered: check GODEBUG http2client, " +
					"Protocols, TLSNextProto and ForceAttemptHTTP2")
			}
		case strings.Contains(m, "connections open to") && strings.Contains(m, ", cap "):
			fs.add("MaxConnsPerHost caps HTTP/1 connections only; HTTP/2 dials past it")
		case strings.HasPrefix(m, lateAttempts):
			fs.add(sub.inLayer() + "stop once the call's context is done: check ctx.Err() before each " +
				"attempt, and end a delay when the context ends")
		case strings.HasPrefix(m, "leak after recovery: open body"), strings.HasPrefix(m, "leak after recovery: active connection"):
			fs.add("close every response body: one left open pins its connection")
		case strings.HasPrefix(m, idleMismatch):
			fs.add("set IdleConnTimeout below the servers' keep-alive timeout (" + nameServerIdleTimeout +
				" says it; connaudit probe -find-idle-timeout measures it), so that the client closes an idle " +
				"connection before the server does")
		}
	}
}

// settingFix says what to change of the setting for which the client
// closed a connection for reason, rather than keep it for the next
// request; "" when reason is no setting's.
func (sub subject) settingFix(reason pool.CloseReason) string {
	switch reason {
	case pool.ReasonKeepAlivesOff:
		if sub.keepsNone != "" && sub.keepsNone != "DisableKeepAlives" {
			return sub.keepsNone + " keeps no idle connection, so that every request dials anew: set it " +
				"to 0 (net/http's default of 2) or more to reuse connections"
		}
		return "DisableKeepAlives closes every connection after one request: unset it to reuse connections"
	case pool.ReasonIdleTimeout:
		return fmt.Sprintf("IdleConnTimeout (%s) closed the connection before it was reused: keep it "+
			"longer than the gap between requests and shorter than the server's keep-alive", yours(sub.idle))
	case pool.ReasonIdlePoolFull:
		return "MaxIdleConnsPerHost (and MaxIdleConns) left no room to keep the connection: raise them"
	}
	return ""
}

// reuseFix names the setting that kept the client from reusing a
// connection ([subject.settingFix]), when a mismatch of s rests on reuse
// (a dial more than expected, the connection's fate, a hidden retry or a
// stale request that needs a kept-alive connection) and the client closed
// a connection that had served a request for that setting: the setting,
// not the fault nor a retry layer, caused what was seen. "" otherwise.
func (sub subject) reuseFix(s Scenario, o Observed, mismatches []string) string {
	rests := false
	for _, m := range mismatches {
		if s.Contract != "" {
			m = strings.TrimPrefix(m, s.Contract+": ")
		}
		for _, p := range []string{"dials:", "connection fate:", "expected a hidden transport retry", unreadMismatch} {
			rests = rests || strings.HasPrefix(m, p)
		}
	}
	if !rests {
		return ""
	}
	reasons := o.lost
	if !o.Fate.Reused && o.Fate.ClosedBy == pool.ClosedByClient {
		reasons = append([]pool.CloseReason{o.Fate.Reason}, reasons...)
	}
	for _, r := range reasons {
		if f := sub.settingFix(r); f != "" {
			return f
		}
	}
	return ""
}

// fixReplayPOST is the fix of a POST the policy allows to be replayed
// that was not.
const fixReplayPOST = "replay the POST as the policy allows, with its body (GetBody)"

// layerFix says what the retry layer under audit must do for the contract
// of s, from what it was seen to do: the rule it broke, or the policy
// field it did not apply; for a layer at its defaults (defaults), what to
// configure, in the contract's numbers, since such a layer was given no
// policy. "" when nothing it did explains the failure.
func layerFix(s Scenario, o Observed, defaults bool) string {
	e, p := s.Expect, s.Policy
	post := strings.HasPrefix(s.Subject, "the POST")
	timeout := e.Class != httptrace.ClassOK && e.Stage != ""
	either := func(configured, atDefaults string) string {
		if defaults {
			return atDefaults
		}
		return configured
	}
	switch {
	case o.Unbounded || o.ClientAttempts == 0:
	case timeout && o.Class != e.Class:
		// An attempt limit or a read timeout that did not end the
		// attempt as it should have: that, before what came of it.
	case o.ClientAttempts > e.ClientAttempts && s.Subject == "503" && e.Class == httptrace.ClassDeadline:
		return either(fmt.Sprintf("apply TotalTimeout (%v) to the attempts and the delays between them: end the call "+
			"with a deadline error when it runs out", p.TotalTimeout),
			fmt.Sprintf("bound the call by a total budget of %v that counts the delays between attempts: end it "+
				"with a deadline error when the budget runs out", p.TotalTimeout))
	case o.ClientAttempts > e.ClientAttempts && (s.Subject == "503" || post && s.Contract != "W4"):
		return either(fmt.Sprintf("apply MaxRetries: stop after %s (%s), and hand the caller the last response",
			retries(p.MaxRetries), text.Plural(p.MaxRetries+1, "attempt")),
			fmt.Sprintf("make at most %s (%s), and hand the caller the last response",
				retries(p.MaxRetries), text.Plural(p.MaxRetries+1, "attempt")))
	case o.ClientAttempts > e.ClientAttempts && post:
		return either("never replay a POST unless the policy allows it (UnsafeRetryNonIdempotent, RetryIdempotencyKey): "+
			"the server may have committed its write",
			"never replay a POST unless told to (it is declared safe to replay, or carries an idempotency key): "+
				"the server may have committed its write")
	case o.ClientAttempts > e.ClientAttempts:
		return fmt.Sprintf("retry 503 only%s: %s is final and reaches the caller as it is", either(" (a nil Retryable)", ""), s.Subject)
	case o.ClientAttempts < e.ClientAttempts && post:
		return fixReplayPOST
	case o.ClientAttempts < e.ClientAttempts:
		return either(fmt.Sprintf("retry a 503, up to MaxRetries (%d) times, waiting Delay (%v) between attempts", p.MaxRetries, p.Delay),
			fmt.Sprintf("retry a 503, up to %d times, waiting %v between attempts", p.MaxRetries, p.Delay))
	case e.Class == httptrace.ClassOK && o.Class != httptrace.ClassOK && e.Status != 0 && o.Status == e.Status:
		return fmt.Sprintf("hand the caller the last response (%d) itself, not an error", e.Status)
	case e.Writes != nil && o.Writes > *e.Writes && s.Contract == "W2":
		return "keep the Idempotency-Key across attempts, so that the server commits once"
	}
	if defaults {
		return configureText(s.Fix, p.Policy)
	}
	return s.Fix
}

// retries says n retries: "1 retry", "2 retries".
func retries(n int) string {
	if n == 1 {
		return "1 retry"
	}
	return fmt.Sprintf("%d retries", n)
}

// configureText says a contract's fix, which names the policy's fields,
// in what a layer at its defaults must be configured to do: each field
// by the contract's value of it.
func configureText(fix string, p retry.Policy) string {
	return strings.NewReplacer(
		"up to MaxRetries times", fmt.Sprintf("up to %d times", p.MaxRetries),
		"after MaxRetries retries", "after "+retries(p.MaxRetries),
		"waiting Delay between", fmt.Sprintf("waiting %v between", p.Delay),
		"by AttemptTimeout", fmt.Sprintf("by a timeout of %v", p.AttemptTimeout),
	).Replace(fix)
}

// inLayer begins a fix of the retry layer's: one configured for the
// contracts must do it; one at its defaults must be configured to.
func (sub subject) inLayer() string {
	if sub.retryDefaults {
		return "configure the retry layer (it runs at its defaults) to "
	}
	return "in the retry layer: "
}

// layerLimit names the attempt limit of the retry layer under audit as a
// fix says it: the caller's layer's, or package retry's, which runs the
// retry contracts over a transport when the caller gives no layer.
func (sub subject) layerLimit() string {
	if sub.ownLayer {
		return "the retry layer's attempt limit"
	}
	return "the attempt limit of package retry, the layer the retry scenarios use when you give none"
}

// idleMismatch begins the mismatch of a transport that keeps idle
// connections as long as the servers do, or longer.
const idleMismatch = "idle timeout: "
