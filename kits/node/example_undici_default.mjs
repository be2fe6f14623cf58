// An example client audited by connaudit serve: undici's RetryAgent as its
// users usually configure it, new RetryAgent(new Agent({…timeouts})) with
// RetryAgent's own defaults: maxRetries 5, minTimeout 500 ms doubling
// (timeoutFactor 2) up to maxTimeout 30 s, Retry-After honoured, statusCodes
// [500, 502, 503, 504, 429], methods GET, HEAD, OPTIONS, PUT, DELETE, TRACE,
// errorCodes ECONNRESET, ECONNREFUSED, ENOTFOUND, ENETDOWN, ENETUNREACH,
// EHOSTDOWN, EHOSTUNREACH, EPIPE, UND_ERR_SOCKET, and throwOnError: true (a
// status still retryable when the retries run out is thrown as
// RequestRetryError, its body not handed back). Beside
// example_undici_retry.mjs, whose options come from the policy: this one
// shows what a user's default gets.
//
//   connaudit serve -- node kits/node/example_undici_default.mjs
//
// The timeouts are the usual ones, from the policy as example_undici.mjs
// sets them: the Agent's headersTimeout and bodyTimeout (the read
// interval), connect.timeout, and AbortSignal.timeout(attempt) per call,
// which under RetryAgent bounds the whole call.
import { fileURLToPath } from 'node:url';
import { loadTerms, main, NotConfigurable } from './kit.mjs';
import { Agent, RetryAgent, agentOptions, counting, kind, keepAliveTimeout, send, undiciVersion } from './example_undici.mjs';

export const undiciDefaultAdapter = {
  name: 'undici-default',
  terms: loadTerms('undici-default'),
  version: undiciVersion,
  config: 'undici.request(url, {dispatcher: new RetryAgent(new Agent({…timeouts})), signal: AbortSignal.timeout(attempt)}): RetryAgent\'s defaults',
  protocols: ['http1'],
  idleTimeoutMs: keepAliveTimeout,
  open(sc) {
    const p = sc.policy;
    if (sc.request.key_per_attempt) throw new NotConfigurable('RetryAgent sends every attempt with the same headers: no new key per attempt');
    if (p.pool_acquire_timeout_ms) {
      throw new NotConfigurable('Agent({connections: 1}) queues a second caller with no acquire timeout: only the call\'s signal ends its wait, as a timeout');
    }
    const { opts, said } = agentOptions(p);
    const dispatcher = new RetryAgent(counting(new Agent(opts)));
    const ms = p.attempt_timeout_ms || p.total_timeout_ms;
    let connauditConfig = `RetryAgent(defaults) over ${said}${ms ? `, AbortSignal.timeout(${ms})` : ''}`;
    if (p.send_ping_timeout_ms) connauditConfig += '; undici has no HTTP/2 PING health check';
    return { ms, dispatcher, connauditConfig };
  },
  send,
  kind,
  async close(c) {
    await c.dispatcher.destroy();
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(undiciDefaultAdapter);
