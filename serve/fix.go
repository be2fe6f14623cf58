package serve

import (
	"fmt"
	"strings"
)

// bound names the setting of the policy a scenario is about.
type bound string

const (
	bRead    bound = "read"
	bAttempt bound = "attempt"
	bConnect bound = "connect"
	bTLS     bound = "tls"
	bPool    bound = "pool"
	bTotal   bound = "total"
)

// boundOf is the policy setting a scenario's unbounded call lacked.
func boundOf(sp *spec) bound {
	p := sp.policy
	switch {
	case p.PoolAcquireTimeoutMS > 0:
		return bPool
	case p.TLSTimeoutMS > 0:
		return bTLS
	case p.ConnectTimeoutMS > 0:
		return bConnect
	case p.ReadTimeoutMS > 0:
		return bRead
	case sp.Expect.BudgetEnds:
		return bTotal
	}
	return bAttempt
}

// fixes says, in one client's own terms, what fixes each kind of failure.
type fixes struct {
	bounds map[bound]string
	// retriedStatus: a status the policy does not retry was; retriedError:
	// an error or timeout was; notRetried: 503 was not (as often);
	// budget: the total budget; post: a POST's replay rule; key: the
	// idempotency key; lastStatus: handing back the last 503; cancel,
	// hidden, pool, recovery.
	retriedStatus, retriedError, notRetried, tooMany, budget, post, key, lastStatus string
	cancel, hidden, recovery, fate                                                  string
	// stale: a connection the server closed while idle was used;
	// openAtDone says what holds connections open after done; idle: the
	// client keeps idle connections as long as the servers do, or longer.
	stale, openAtDone, idle string
	// health: what checks an HTTP/2 connection's health (a connection gone
	// dark kept taking requests); empty: the scenario's fix, in the
	// policy's terms.
	health string
}

// curlBudget is what bounds a curl call's retries as a whole: no option
// of curl's (measured: TestTruthCurlRetryBudget).
const curlBudget = "curl has no total budget that ends a call: --retry-max-time (whole seconds) is checked before " +
	"each retry's delay, the delay not counted, and then curl hands back the last response, no timeout; --max-time " +
	"bounds each attempt, not the delays: bound the invocation from outside (timeout(1)) or loop on %{http_code} in " +
	"the script, counting the budget"

// clientFixes are the clients whose fixes are said in their own terms.
var clientFixes = map[string]fixes{
	"curl": {
		bounds: map[bound]string{
			bRead:    "curl has no read timeout: --speed-limit 1 --speed-time N aborts a transfer slower than 1 byte/s for N whole seconds, measured as an average over about 5 s, so a stall after data is noticed seconds late",
			bAttempt: "--max-time SECONDS (fractions allowed) bounds each transfer, retries each get their own",
			bConnect: "--connect-timeout SECONDS bounds the connect (and the TLS handshake)",
			bTLS:     "--connect-timeout SECONDS bounds the TLS handshake with the connect",
			bTotal:   curlBudget,
			bPool:    "curl has no pool of one to wait for",
		},
		retriedStatus: "curl's --retry retries 408, 429, 500, 502, 503 and 504 alike: to retry 503 only, drop --retry and loop on %{http_code} in the script",
		retriedError:  "curl's --retry retries timeouts too (and --retry-all-errors every error): to retry 503 only, drop --retry and loop on %{http_code}",
		notRetried:    "--retry N (with --retry-delay SECONDS) retries a 503",
		tooMany:       "--retry N caps the retries at N",
		budget:        curlBudget,
		post:          "curl's --retry replays a POST as any request: leave --retry off for a request that must not be replayed",
		key:           "set the Idempotency-Key with -H once, outside any retry loop",
		lastStatus:    "without --fail curl hands back the last response's status",
		cancel:        "a curl that is stopped (SIGTERM) closes its connections",
		hidden:        "curl replays a request whose reused connection died before any response byte (measured: 1 call, 2 requests): send Connection: close where a replay must not happen",
		recovery:      "one curl invocation must serve both URLs: pass the /ok URL with --next",
		fate:          "curl keeps a connection open for the next URL of the same invocation unless told otherwise",
		stale:         "curl checks a cached connection before it reuses it and sends a request again on a new one when the reused one died before any response byte: nothing to set; a POST that must not be written twice goes on a fresh connection (an invocation of its own, or -H 'Connection: close' on the transfer before it)",
		health:        "the curl tool has no HTTP/2 health check (libcurl's upkeep PINGs keep a connection alive, sent only when an application calls curl_easy_upkeep): a connection whose transfer timed out stays in the invocation's connection cache and takes its next transfer, which hangs too; send what follows a timeout in a new curl invocation (a cache of its own), or use --http1.1, over which curl closes a connection a transfer timed out on",
		idle:          "the curl tool cannot shorten libcurl's CURLOPT_MAXAGE_CONN (118 s), but its connection cache lives only as long as the invocation: keep each invocation shorter than the servers' keep-alive timeout, so that none of its connections is idle that long (a later request in a new invocation, on a new connection), or use libcurl with CURLOPT_MAXAGE_CONN below that timeout",
	},
	"requests": {
		bounds: map[bound]string{
			bRead:    "timeout=(connect, read): the read timeout bounds the wait for the headers and for each read of the body",
			bAttempt: "requests has no attempt deadline (timeout bounds each read, not the call): read the body under a timer of your own, or use timeout=(c, r) as the bound",
			bConnect: "timeout=(connect, read): the connect timeout bounds the TCP connect",
			bTLS:     "timeout=(connect, read): the TLS handshake counts against the read timeout",
			bTotal:   "urllib3 Retry has no total budget: bound the call with a deadline of your own",
			bPool:    "requests passes no pool_timeout to urllib3, so with HTTPAdapter(pool_maxsize=1, pool_block=True) a second caller waits for the connection with no bound (neither the connect nor the read timeout bounds that wait): use urllib3 directly, PoolManager(maxsize=1, block=True) with urlopen(..., pool_timeout=SECONDS), which raises EmptyPoolError",
		},
		retriedStatus: "urllib3 Retry: status_forcelist=[503] only",
		retriedError:  "urllib3 Retry(connect=0, read=0, other=0) so that only the statuses of status_forcelist are retried",
		notRetried:    "urllib3 Retry(total=N, status_forcelist=[503], allowed_methods=...) mounted with HTTPAdapter(max_retries=...)",
		tooMany:       "urllib3 Retry(total=N) caps the retries",
		budget:        "urllib3 Retry has no total budget: bound the call with a deadline of your own",
		post:          "urllib3 Retry(allowed_methods=...): POST is left out by default; add it only for a request the server deduplicates",
		key:           "set the Idempotency-Key header once, on the request, outside any retry loop",
		lastStatus:    "urllib3 Retry(raise_on_status=False) hands back the last 503 instead of raising MaxRetryError",
		cancel:        "close the response (or the Session) to drop the connection",
		hidden:        "urllib3 retries a request on a dropped connection as a read error: Retry(read=0) stops it",
		recovery:      "send /ok through the same requests.Session",
		fate:          "urllib3 returns a connection to the pool only once the body is read",
		stale:         "urllib3 Retry(read=1, allowed_methods={\"GET\", \"HEAD\"}) sends an idempotent request again when its reused connection died before a response",
		idle:          "urllib3 has no idle timeout: close the Session (or HTTPAdapter.close()) once it has been idle for a time shorter than the servers' keep-alive timeout (a timer of your own), so that it drops its connections before the server would",
	},
	"httpx": {
		bounds: map[bound]string{
			bRead:    "httpx.Timeout(read=SECONDS) bounds the wait for the headers and between reads",
			bAttempt: "httpx has no deadline for the whole call: httpx.Timeout bounds each phase; wrap the call in a timer of your own",
			bConnect: "httpx.Timeout(connect=SECONDS)",
			bTLS:     "httpx.Timeout(connect=SECONDS) bounds the TLS handshake with the connect",
			bTotal:   "httpx has no total budget",
			bPool:    "httpx.Limits(max_connections=1) and httpx.Timeout(pool=SECONDS)",
		},
		retriedStatus: "httpx retries no status; the retry is yours: retry 503 only",
		retriedError:  "httpx.HTTPTransport(retries=N) retries connect errors only: leave it at 0",
		notRetried:    "httpx retries no status: a retry layer of your own must retry 503",
		tooMany:       "cap your retry loop at max_retries",
		budget:        "httpx has no total budget",
		post:          "never replay a POST without an Idempotency-Key",
		key:           "set the Idempotency-Key once, outside the retry loop",
		lastStatus:    "hand back the last 503",
		cancel:        "close the response or the client to drop the connection",
		hidden:        "httpx does not replay by itself; check your retry layer",
		recovery:      "send /ok through the same httpx.Client",
		fate:          "httpx returns a connection to the pool once the body is read or closed",
		stale:         "httpx.HTTPTransport(retries=N) retries connects only: retry RemoteProtocolError and ReadError for idempotent methods in a loop of your own",
		idle:          "httpx.Limits(keepalive_expiry=SECONDS) below the servers' keep-alive timeout",
	},
	"fetch": {
		bounds: map[bound]string{
			bRead:    "undici Agent({headersTimeout, bodyTimeout}) passed as fetch's dispatcher bounds the wait for headers and between body chunks",
			bAttempt: "signal: AbortSignal.timeout(ms) bounds the whole call, body included",
			bConnect: "undici Agent({connect: {timeout: ms}}) as the dispatcher",
			bTLS:     "undici Agent({connect: {timeout: ms}}) bounds the TLS handshake with the connect",
			bTotal:   "AbortSignal.timeout(total) around the retry loop, AbortSignal.any with each attempt's",
			bPool:    "undici Agent({connections: 1}) queues a second caller; fetch has no acquire timeout besides the signal",
		},
		retriedStatus: "fetch retries nothing: your retry loop must retry 503 only",
		retriedError:  "fetch retries nothing: your retry loop must not retry errors",
		notRetried:    "fetch retries nothing: retry 503 in a loop of your own",
		tooMany:       "cap your retry loop at max_retries",
		budget:        "AbortSignal.timeout(total) over the whole loop",
		post:          "never replay a POST without an Idempotency-Key",
		key:           "set the Idempotency-Key once, outside the retry loop",
		lastStatus:    "hand back the last 503",
		cancel:        "abort the call's AbortController; undici then closes the connection",
		hidden:        "undici sent the request on a new connection (measured: a request right after another gets a new one): the kept one did not serve it",
		recovery:      "send /ok through the same dispatcher",
		fate:          "undici sent the next request on a new connection while the faulted one stayed open idle (measured: fetch does not reuse a connection for a request sent right after the previous response's body ended)",
		openAtDone:    "fetch's global dispatcher keeps idle connections until its keepAliveTimeout: pass an undici Agent of your own as the dispatcher and close() it when done",
		stale:         "fetch retries nothing: retry \"fetch failed\" (UND_ERR_SOCKET, ECONNRESET) for idempotent methods in a loop of your own",
		idle:          "new Agent({keepAliveTimeout: ms}) as fetch's dispatcher, below the servers' keep-alive timeout (undici takes a Keep-Alive: timeout=N header, less 2 s, when the server sends one)",
	},
	"axios": {
		bounds: map[bound]string{
			bRead:    "axios has no read interval: timeout bounds the whole request in Node; an http.Agent's timeout bounds socket idleness",
			bAttempt: "axios timeout (ms), with axios-retry shouldResetTimeout: true so that each retry gets its own",
			bConnect: "axios has no connect timeout of its own: timeout covers the connect",
			bTLS:     "axios timeout covers the TLS handshake",
			bTotal:   "axios-retry has no total budget: an AbortSignal.timeout(total) as the request's signal",
			bPool:    "http.Agent({maxSockets: 1}) queues a second caller; axios has no acquire timeout besides timeout",
		},
		retriedStatus: "axios-retry's retryCondition: (e) => e.response?.status === 503 (its default retries every 5xx of an idempotent request)",
		retriedError:  "axios-retry's retryCondition: (e) => e.response?.status === 503 (its default retries network errors and timeouts)",
		notRetried:    "axios-retry({retries: N, retryCondition: (e) => e.response?.status === 503})",
		tooMany:       "axios-retry's retries caps the retries",
		budget:        "axios-retry has no total budget: give the request a signal: AbortSignal.timeout(total)",
		post:          "axios-retry's retryCondition decides for POST: leave it out unless the server deduplicates",
		key:           "set the Idempotency-Key in the request's headers once, not in an interceptor per attempt",
		lastStatus:    "axios rejects a 503 (validateStatus): the error's response is the last 503",
		cancel:        "abort the request's AbortController; Node then destroys the socket",
		hidden:        "Node's http client does not replay: check axios-retry's retryCondition",
		recovery:      "send /ok through the same axios instance and agent",
		fate:          "Node's agent keeps a socket whose response was read",
		stale:         "axios-retry's default retryCondition (isNetworkOrIdempotentRequestError) sends an idempotent request again when its connection died",
		idle:          "new http.Agent({keepAlive: true, timeout: ms}) below the servers' keep-alive timeout (Node's agent keeps idle sockets with no timeout)",
	},
	"webclient": {
		bounds: map[bound]string{
			bRead:    "HttpClient.responseTimeout(d) (Reactor Netty): the read interval, for the headers and between body reads",
			bAttempt: "timeout(d) before retryWhen bounds each attempt, body included",
			bConnect: "option(ChannelOption.CONNECT_TIMEOUT_MILLIS, ms)",
			bTLS:     "secure(spec -> spec.sslContext(...).handshakeTimeout(d))",
			bTotal:   "timeout(d) after retryWhen bounds all attempts and delays",
			bPool:    "ConnectionProvider.builder(name).maxConnections(1).pendingAcquireTimeout(d): a second caller is refused with a PoolAcquireTimeoutException",
		},
		retriedStatus: "Retry.fixedDelay(n, d).filter(e -> a WebClientResponseException of 503 only)",
		retriedError:  "Retry.fixedDelay(n, d).filter(...) must not accept a TimeoutException or a WebClientRequestException",
		notRetried:    "retryWhen(Retry.fixedDelay(n, d).filter(503))",
		tooMany:       "Retry.fixedDelay(n, d) caps the retries at n",
		budget:        "timeout(total) after retryWhen, not before: before it, it is resubscribed with each attempt",
		post:          "filter POST out of the retry unless it carries an Idempotency-Key",
		key:           "set the Idempotency-Key on the request once, outside retryWhen's resubscription",
		lastStatus:    "onRetryExhaustedThrow((spec, signal) -> signal.failure()) hands back the last 503",
		cancel:        "dispose the subscription: Reactor Netty closes the connection",
		hidden:        "HttpClient.disableRetry(true): Reactor Netty's own retry (on by default) sends a request again on a new connection when the connection it held was reset before the request was written",
		recovery:      "send /ok through the same WebClient and ConnectionProvider",
		fate:          "Reactor Netty releases a connection to the pool once the body was consumed",
		stale:         "Reactor Netty drops a pooled connection whose close it has read when it is acquired; one closed as the request is written fails with PrematureCloseException or a reset, nothing read: retry that in Retry.filter for a GET only, and set ConnectionProvider.builder(name).maxIdleTime(d) below the server's keep-alive timeout",
		idle:          "ConnectionProvider.builder(name).maxIdleTime(d) (or -Dreactor.netty.pool.maxIdleTime) below the servers' keep-alive timeout, with evictInBackground(d): without it an idle connection is closed only at the next acquire",
		openAtDone:    "ConnectionProvider.dispose() (or disposeLater()) closes the pool's connections",
	},
	"restclient": {
		bounds: map[bound]string{
			bRead:    "the JDK HttpClient has no read interval: JdkClientHttpRequestFactory.setReadTimeout(d) sets HttpRequest.timeout(d), one deadline for the whole exchange, body included",
			bAttempt: "JdkClientHttpRequestFactory.setReadTimeout(d) (HttpRequest.timeout(d)) bounds each attempt, body included",
			bConnect: "HttpClient.newBuilder().connectTimeout(d)",
			bTLS:     "HttpClient.newBuilder().connectTimeout(d) bounds the TLS handshake with the connect",
			bTotal:   "the retry interceptor must check the total budget before each attempt and bound each delay by what is left of it",
			bPool:    "the JDK HttpClient has no bound on connections per host and no acquire timeout: a second caller gets a connection of its own",
		},
		retriedStatus: "the retry interceptor must retry 503 only",
		retriedError:  "the retry interceptor must not retry an IOException or an HttpTimeoutException",
		notRetried:    "a ClientHttpRequestInterceptor that retries a 503 max_retries times, delay apart",
		tooMany:       "cap the interceptor's retries at max_retries",
		budget:        "the interceptor must end the call when the total budget is spent, in a delay too",
		post:          "never replay a POST without an Idempotency-Key",
		key:           "set the Idempotency-Key once, outside the interceptor's loop",
		lastStatus:    "hand the last 503 back when the retries run out",
		cancel:        "interrupt the calling thread: Spring's JdkClientHttpRequest then cancels the JDK's future, which closes the connection",
		hidden:        "the JDK HttpClient sends a GET or HEAD once more on a new connection when its connection fails before any byte of the response (MultiExchange: a ConnectionExpiredException); no setting turns that off (jdk.httpclient.enableAllMethodRetry extends it to every method): count the server's requests, not the interceptor's attempts",
		recovery:      "send /ok through the same RestClient and HttpClient",
		fate:          "the JDK HttpClient returns a connection to its pool once the body was read",
		stale:         "the JDK HttpClient drops an idle connection whose FIN or RST it read; on one closed as a request arrives it sends a GET again by itself and gives the caller a POST's loss: set jdk.httpclient.keepalive.timeout below the server's keep-alive timeout",
		idle:          "-Djdk.httpclient.keepalive.timeout=SECONDS below the servers' keep-alive timeout, set before the first HttpClient is built (1200 s in JDK 17, 30 s from JDK 20)",
		openAtDone:    "the JDK 17 HttpClient has no close(): its idle connections stay open for jdk.httpclient.keepalive.timeout (1200 s) or until the client is garbage-collected; from JDK 21 HttpClient.close() closes them",
	},
}

func init() {
	clientFixes["jdk-httpclient"] = clientFixes["restclient"]
}

// generic says fixes in the policy's own terms, for a client this server
// does not know.
var generic = fixes{
	bounds: map[bound]string{
		bRead: "apply read_timeout_ms: a read interval for the headers and between body reads", bAttempt: "apply attempt_timeout_ms to each attempt, body included",
		bConnect: "apply connect_timeout_ms", bTLS: "apply tls_timeout_ms to the TLS handshake", bTotal: "apply total_timeout_ms to all attempts and delays",
		bPool: "a pool of pool_max_per_host connections whose callers wait at most pool_acquire_timeout_ms",
	},
	retriedStatus: "retry only the statuses of retry_statuses", retriedError: "retry errors only when retry_errors is true",
	notRetried: "retry the statuses of retry_statuses, max_retries times", tooMany: "at most max_retries retries",
	budget: "end the call when total_timeout_ms is spent, in a delay too", post: "replay a POST only as retry_any_method or retry_with_idempotency_key allow",
	key: "keep the Idempotency-Key across attempts", lastStatus: "hand back the last response when retries run out",
	cancel: "close the connection when the call is cancelled or times out", hidden: "say which requests the client replays by itself",
	recovery: "send /ok through the same client", fate: "see the connection's fate",
	stale:      "check a pooled connection before reusing it, or close idle connections before the server does (an idle timeout below the server's keep-alive timeout)",
	idle:       "close idle connections before the servers do: an idle timeout below their keep-alive timeout (connaudit serve -server-idle-timeout states it; connaudit probe -find-idle-timeout measures it)",
	openAtDone: "close the client (its pool) when done",
}

// fixFor says what fixes fails in client's terms.
func fixFor(client string, sp *spec, fails []failure) string {
	f, ok := clientFixes[strings.ToLower(client)]
	if !ok {
		f = generic
	}
	var out []string
	addf := func(s string) {
		if s != "" && !containsStr(out, s) {
			out = append(out, s)
		}
	}
	if f.stale == "" {
		f.stale = generic.stale
	}
	if f.idle == "" {
		f.idle = generic.idle
	}
	for _, x := range fails {
		switch x {
		case failUnbounded:
			addf(f.bounds[boundOf(sp)])
		case failRetriedStatus:
			addf(f.retriedStatus)
		case failRetriedError:
			addf(f.retriedError)
		case failNotRetried:
			addf(f.notRetried)
		case failTooMany:
			addf(f.tooMany)
		case failBudget:
			addf(f.budget)
		case failPost:
			addf(f.post)
		case failKey:
			addf(f.key)
		case failLastStatus:
			addf(f.lastStatus)
		case failCancel:
			addf(f.cancel)
		case failHidden:
			addf(f.hidden)
		case failRecovery:
			addf(f.recovery)
		case failPool:
			addf(f.bounds[bPool])
		case failFate:
			addf(f.fate)
		case failStale:
			addf(f.stale)
		case failIdle:
			addf(f.idle)
		case failOutcome:
			if b := boundOf(sp); sp.caller.Error == KindTimeout || sp.caller.Error == KindPool {
				addf(f.bounds[b])
			}
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("see the mismatches: the client's %s", sp.Name)
	}
	return strings.Join(out, "; ")
}

// healthFix says what checks an HTTP/2 connection's health, in the
// client's own terms where it is known, else the scenario's fix.
func healthFix(client string, sp *spec) string {
	if f, ok := clientFixes[strings.ToLower(client)]; ok && f.health != "" {
		return f.health
	}
	return sp.Fix
}

// openAtDoneFix says, in the client's own terms where it is known, what
// holds connections open after done, and what closes them.
func openAtDoneFix(client string) string {
	if f, ok := clientFixes[strings.ToLower(client)]; ok {
		return f.openAtDone
	}
	return generic.openAtDone
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
