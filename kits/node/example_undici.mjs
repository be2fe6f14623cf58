// An example client audited by connaudit serve: undici used directly (the
// package, pinned in package.json, not Node's built-in copy), its own
// request() on a dispatcher of its own per scenario: an Agent (a Pool per
// origin) configured from the policy, no retry layer.
//
//   connaudit serve -- node kits/node/example_undici.mjs
//
// The policy in undici's terms: Agent({connections: pool_max_per_host,
// pipelining: 1, headersTimeout and bodyTimeout: read_timeout_ms, connect:
// {timeout: the larger of connect_timeout_ms and tls_timeout_ms, ca},
// keepAliveTimeout: 4000, keepAliveMaxTimeout: 600000}) and a signal per
// call: AbortSignal.timeout(attempt_timeout_ms), which ends the call body
// included. undici has no acquire timeout for a pool of one (a second caller
// waits in the queue until the signal): pool-acquire-timeout is not
// configurable. No HTTP/2 here (allowH2 off: undici has no PING health check
// to configure).
//
// Measured against raw sockets (test/truth_undici.test.mjs): undici sends
// nothing again by itself — a GET or a POST whose kept-alive connection the
// server closed (FIN) or reset, read or unread, reaches the caller as
// SocketError (UND_ERR_SOCKET) or ECONNRESET, 1 request at most; before it
// writes on an idle kept-alive connection it lets a setImmediate pass, so a
// FIN that came while idle is seen and the call goes on a new connection,
// but an RST that comes as the call waits for that check fails the call
// (ECONNRESET), none of it written; a call sent in the same turn as the
// previous body's end goes on another connection (the kit lets a 0 ms
// timer pass); a body left unread holds its connection once it outgrows
// the stream's buffers: with connections: 1 the next call waits in the
// queue until it is read, or until its own signal ends it.
//
// example_undici_retry.mjs and example_undici_default.mjs put undici's
// RetryAgent over the same Agent: the policy's retry rules, and RetryAgent's
// own defaults.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Agent, RetryAgent, request } from 'undici';
import { loadTerms, main, NotConfigurable } from './kit.mjs';

const pkg = JSON.parse(fs.readFileSync(new URL('./node_modules/undici/package.json', import.meta.url)));
export const undiciVersion = pkg.version;
const ca = process.env.CONNAUDIT_CA ? fs.readFileSync(process.env.CONNAUDIT_CA) : undefined;

// undici's defaults, said explicitly: an idle connection is kept 4 s (a
// server's "Keep-Alive: timeout=N" makes it N s less 2 s, at most
// keepAliveMaxTimeout), one request at a time on a connection.
export const keepAliveTimeout = 4000;
export const keepAliveMaxTimeout = 600000;

// agentOptions maps a policy to undici's Agent options and says them.
export function agentOptions(p) {
  const opts = { pipelining: 1, keepAliveTimeout, keepAliveMaxTimeout, connect: ca ? { ca } : {} };
  const said = ['pipelining 1', `keepAliveTimeout ${keepAliveTimeout}`];
  if (p.pool_max_per_host) {
    opts.connections = p.pool_max_per_host;
    said.push(`connections ${p.pool_max_per_host}`);
  }
  if (p.read_timeout_ms) {
    opts.headersTimeout = p.read_timeout_ms;
    opts.bodyTimeout = p.read_timeout_ms;
    said.push(`headersTimeout ${p.read_timeout_ms}, bodyTimeout ${p.read_timeout_ms}`);
  }
  const connect = Math.max(p.connect_timeout_ms, p.tls_timeout_ms);
  if (connect) {
    opts.connect.timeout = connect;
    said.push(`connect.timeout ${connect}`);
  }
  return { opts, said: `Agent({${said.join(', ')}})` };
}

// counting returns agent with an interceptor that counts each dispatch of a
// call (each attempt RetryAgent makes) in the call's opts.connauditCall.
export function counting(agent) {
  return agent.compose((dispatch) => (opts, handler) => {
    if (opts.connauditCall) opts.connauditCall.n++;
    return dispatch(opts, handler);
  });
}

// send is one call through c.dispatcher: the body read to its end, or
// readBytes of it and then destroyed. The attempts are the dispatches the
// interceptor counted (1 without RetryAgent), thrown errors too.
export async function send(c, sc, { method, url, headers, body, readBytes, signal }) {
  const call = { n: 0 };
  const signals = [];
  if (c.ms) signals.push(AbortSignal.timeout(c.ms));
  if (signal) signals.push(signal);
  try {
    const res = await request(url, { dispatcher: c.dispatcher, method, connauditCall: call,
      headers: body ? { ...headers, 'content-type': 'application/json' } : headers, body: body || undefined,
      signal: signals.length ? AbortSignal.any(signals) : undefined });
    let n = 0;
    for await (const chunk of res.body) {
      n += chunk.length;
      if (readBytes !== undefined && n >= readBytes) {
        res.body.destroy();
        break;
      }
    }
    return { status: res.statusCode, attempts: Math.max(call.n, 1) };
  } catch (e) {
    e.connauditAttempts = Math.max(call.n, 1);
    throw e;
  }
}

// kind classes undici's errors by their codes (undici's errors carry one),
// the signal's by name.
export function kind(e) {
  if (e.name === 'TimeoutError') return 'timeout';
  if (e.name === 'AbortError' || e.code === 'UND_ERR_ABORTED') return 'canceled';
  const code = e.code || e.cause?.code || '';
  if (/^UND_ERR_(HEADERS|BODY|CONNECT)_TIMEOUT$|^ETIMEDOUT$/.test(code)) return 'timeout';
  if (/^(UND_ERR_SOCKET|UND_ERR_CLOSED|ECONNRESET|ECONNREFUSED|EPIPE|UND_ERR_RES_CONTENT_LENGTH_MISMATCH|HPE_.*)$/.test(code)) return 'connection';
  return 'other';
}

export const undiciAdapter = {
  name: 'undici',
  terms: loadTerms('undici'),
  version: undiciVersion,
  config: 'undici.request(url, {dispatcher: new Agent({…from the policy}), signal: AbortSignal.timeout(attempt)}), no retry layer',
  protocols: ['http1'],
  idleTimeoutMs: keepAliveTimeout,
  open(sc) {
    const p = sc.policy;
    if (sc.expect.attempts > 1) throw new NotConfigurable('undici.request retries nothing without a RetryAgent (example_undici_retry.mjs)');
    if (p.pool_acquire_timeout_ms) {
      throw new NotConfigurable('Agent({connections: 1}) queues a second caller with no acquire timeout: only the call\'s signal ends its wait, as a timeout');
    }
    const { opts, said } = agentOptions(p);
    const dispatcher = counting(new Agent(opts));
    let connauditConfig = `${said}${p.attempt_timeout_ms ? `, AbortSignal.timeout(${p.attempt_timeout_ms})` : ''}`;
    if (p.send_ping_timeout_ms) connauditConfig += '; undici has no HTTP/2 PING health check';
    return { ms: p.attempt_timeout_ms, dispatcher, connauditConfig };
  },
  send,
  kind,
  async close(c) {
    await c.dispatcher.destroy();
  },
};

// RetryAgent is re-exported for the examples over it.
export { Agent, RetryAgent };

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(undiciAdapter);
