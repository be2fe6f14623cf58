// An example client audited by connaudit serve: undici's RetryAgent over an
// Agent, its retry options from each scenario's policy, as a team would
// configure it to the contracts: RetryAgent(agent, {maxRetries, minTimeout
// and maxTimeout: delay_ms, timeoutFactor: 1, statusCodes: retry_statuses,
// methods: the methods the policy lets it replay, errorCodes: [] unless
// retry_errors, throwOnError: false}).
//
//   connaudit serve -- node kits/node/example_undici_retry.mjs
//
// The Agent is example_undici.mjs's, but for the attempt limit: under
// RetryAgent a signal bounds the whole call (total_timeout_ms:
// AbortSignal.timeout(total)), so attempt_timeout_ms becomes the Agent's
// headersTimeout and bodyTimeout (read_timeout_ms where the policy has
// one), which each attempt restarts: a read interval, not a deadline.
// throwOnError: false hands the last response back when the retries run
// out; RetryAgent's default (true) throws RequestRetryError instead
// (example_undici_default.mjs). The attempts are the dispatches an
// interceptor under RetryAgent counts.
import { fileURLToPath } from 'node:url';
import { loadTerms, main, NotConfigurable } from './kit.mjs';
import { Agent, RetryAgent, agentOptions, counting, kind, keepAliveTimeout, send, undiciVersion } from './example_undici.mjs';

// retryOptions maps a policy to RetryAgent's options for the scenario's
// request, and says them.
export function retryOptions(sc) {
  const p = sc.policy;
  const method = sc.request.method;
  const replayable = p.retry_methods.includes(method) || p.retry_any_method ||
    (p.retry_with_idempotency_key && sc.request.headers['Idempotency-Key'] !== undefined);
  const methods = replayable && !p.retry_methods.includes(method) ? [...p.retry_methods, method] : [...p.retry_methods];
  const o = { maxRetries: p.max_retries, minTimeout: p.delay_ms, maxTimeout: p.delay_ms, timeoutFactor: 1,
    statusCodes: p.retry_statuses, methods, throwOnError: false };
  if (!p.retry_errors) o.errorCodes = [];
  const said = `RetryAgent({maxRetries: ${o.maxRetries}, minTimeout: ${o.minTimeout}, maxTimeout: ${o.maxTimeout}, ` +
    `timeoutFactor: 1, statusCodes: ${JSON.stringify(o.statusCodes)}, methods: ${JSON.stringify(o.methods)}, ` +
    `errorCodes: ${p.retry_errors ? 'default' : '[]'}, throwOnError: false})`;
  return { o, said };
}

export const undiciRetryAdapter = {
  name: 'undici-retry',
  terms: loadTerms('undici-retry'),
  version: undiciVersion,
  config: 'undici.request(url, {dispatcher: new RetryAgent(new Agent({…}), {…from the policy}), signal: AbortSignal.timeout(total)})',
  protocols: ['http1'],
  idleTimeoutMs: keepAliveTimeout,
  open(sc) {
    const p = sc.policy;
    if (sc.request.key_per_attempt) throw new NotConfigurable('RetryAgent sends every attempt with the same headers: no new key per attempt');
    if (p.pool_acquire_timeout_ms) {
      throw new NotConfigurable('Agent({connections: 1}) queues a second caller with no acquire timeout: only the call\'s signal ends its wait, as a timeout');
    }
    const interval = p.read_timeout_ms || p.attempt_timeout_ms;
    const { opts, said } = agentOptions({ ...p, read_timeout_ms: interval });
    const { o, said: retrySaid } = retryOptions(sc);
    const dispatcher = new RetryAgent(counting(new Agent(opts)), o);
    let connauditConfig = `${retrySaid} over ${said}${p.total_timeout_ms ? `, AbortSignal.timeout(${p.total_timeout_ms})` : ''}`;
    if (p.attempt_timeout_ms && !p.read_timeout_ms) connauditConfig += '; the attempt limit as headersTimeout and bodyTimeout: a read interval';
    if (p.send_ping_timeout_ms) connauditConfig += '; undici has no HTTP/2 PING health check';
    return { ms: p.total_timeout_ms, dispatcher, connauditConfig };
  },
  send,
  kind,
  async close(c) {
    await c.dispatcher.destroy();
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(undiciRetryAdapter);
