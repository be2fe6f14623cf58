// An example client audited by connaudit serve: axios with axios-retry,
// configured from each scenario's policy as a team would: timeout (ms),
// http.Agent({keepAlive, maxSockets}), axiosRetry({retries, retryDelay,
// retryCondition: the policy's statuses and methods, shouldResetTimeout}).
//
//   connaudit serve -- node kits/node/example_axios.mjs
//
// The agent keeps an idle socket until the server closes it: Node 20's
// http.Agent sets a free socket's timeout to the Agent's own timeout option
// (none here: 0, never) and takes a server's "Keep-Alive: timeout=N" hint
// only when it is below that one (Agent.prototype.keepSocketAlive); it
// destroys a free socket the server closed (FIN or RST) as it arrives.
// Node's http has no HTTP/2, so no PING health check to configure.
//
// CONNAUDIT_EXAMPLE=default-condition keeps axios-retry's default
// retryCondition (network errors and 5xx of idempotent requests) on
// contract A5, for the test that a broken configuration fails A5.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import axios from 'axios';
import axiosRetry, { isNetworkOrIdempotentRequestError } from 'axios-retry';
import { loadTerms, main, NotConfigurable } from './kit.mjs';

const ca = process.env.CONNAUDIT_CA ? fs.readFileSync(process.env.CONNAUDIT_CA) : undefined;
const pkg = JSON.parse(fs.readFileSync(new URL('./node_modules/axios-retry/package.json', import.meta.url)));

export const axiosAdapter = {
  name: 'axios',
  terms: loadTerms('axios'),
  version: `${axios.VERSION} (axios-retry ${pkg.version})`,
  config: 'axios.create({timeout, httpAgent}), axiosRetry({retries, retryDelay, retryCondition, shouldResetTimeout: true})',
  protocols: ['http1'],
  // http.Agent({keepAlive: true}) with no timeout: idle sockets are kept
  // until the server closes them.
  idleTimeoutMs: 0,
  open(sc) {
    const p = sc.policy;
    if (sc.request.key_per_attempt) throw new NotConfigurable('axios-retry resends the same headers: no new key per attempt');
    const agentOpts = { keepAlive: true, maxSockets: p.pool_max_per_host || Infinity };
    const httpAgent = new http.Agent(agentOpts);
    const httpsAgent = new https.Agent({ ...agentOpts, ca });
    const timeout = p.attempt_timeout_ms || p.read_timeout_ms || Math.max(p.connect_timeout_ms, p.tls_timeout_ms);
    const client = axios.create({ timeout, httpAgent, httpsAgent, validateStatus: () => true, maxRedirects: 0 });
    const method = sc.request.method;
    const replayable = p.retry_methods.includes(method) || p.retry_any_method ||
      (p.retry_with_idempotency_key && sc.request.headers['Idempotency-Key'] !== undefined);
    let attempts = 0;
    client.interceptors.request.use((cfg) => { attempts++; return cfg; });
    let retryCondition = (e) => replayable && p.retry_statuses.includes(e.response?.status) ||
      (replayable && p.retry_errors && !e.response);
    let cond = `statuses ${JSON.stringify(p.retry_statuses)}${replayable ? '' : ', not this method'}`;
    if (process.env.CONNAUDIT_EXAMPLE === 'default-condition' && sc.name === 'retry/500') {
      retryCondition = (e) => isNetworkOrIdempotentRequestError(e);
      cond = "axios-retry's default retryCondition";
    }
    // axios-retry retries only rejected requests: 5xx must reject for it.
    client.defaults.validateStatus = (s) => !(p.retry_statuses.includes(s) || s >= 500) || p.max_retries === 0;
    axiosRetry(client, { retries: p.max_retries, retryDelay: () => p.delay_ms, retryCondition, shouldResetTimeout: true });
    client.connauditConfig = `timeout ${timeout}, maxSockets ${agentOpts.maxSockets}, retries ${p.max_retries}, delay ${p.delay_ms}, retryCondition ${cond}`;
    if (p.send_ping_timeout_ms) client.connauditConfig += "; Node's http has no HTTP/2 PING health check";
    client.connauditAttempts = () => attempts;
    client.connauditReset = () => { attempts = 0; };
    client.connauditAgents = [httpAgent, httpsAgent];
    return client;
  },
  async send(client, sc, { method, url, headers, body, readBytes, signal }) {
    client.connauditReset();
    let res;
    try {
      res = await client.request({ method, url, headers: body ? { ...headers, 'Content-Type': 'application/json' } : headers,
        data: body || undefined, signal, responseType: 'stream' });
    } catch (e) {
      if (e.response) {
        e.response.data.destroy?.();
        return { status: e.response.status, attempts: client.connauditAttempts() };
      }
      e.connauditAttempts = client.connauditAttempts();
      throw e;
    }
    let n = 0;
    await new Promise((resolve, reject) => {
      res.data.on('data', (chunk) => {
        n += chunk.length;
        if (readBytes !== undefined && n >= readBytes) {
          res.data.destroy();
          resolve();
        }
      });
      res.data.on('end', resolve);
      res.data.on('error', reject);
      res.data.on('close', () => (res.data.readableEnded || readBytes !== undefined ? resolve() : reject(Object.assign(new Error('body cut short'), { code: 'ECONNRESET' }))));
    }).catch((e) => {
      e.connauditAttempts = client.connauditAttempts();
      throw e;
    });
    return { status: res.status, attempts: client.connauditAttempts() };
  },
  // statusOf: a response axios rejected (validateStatus: ERR_BAD_RESPONSE
  // for 5xx, ERR_BAD_REQUEST for 4xx) is its status, not an error.
  statusOf(e) {
    return e.response?.status;
  },
  kind(e) {
    const code = e.code || '';
    if (code === 'ECONNABORTED' || code === 'ETIMEDOUT' || /timeout/i.test(e.message)) return 'timeout';
    if (code === 'ERR_CANCELED' || e.name === 'CanceledError') return 'canceled';
    // ERR_BAD_RESPONSE alone is no lost connection: axios gives it to a
    // status validateStatus rejects too; a body cut short says "aborted".
    if (!e.response && /ECONN|EPIPE|socket hang up|aborted|ERR_SOCKET/.test(code + ' ' + e.message)) return 'connection';
    return 'other';
  },
  close(client) {
    for (const a of client.connauditAgents) a.destroy();
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(axiosAdapter);
