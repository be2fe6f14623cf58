// An example client audited by connaudit serve: Node's built-in fetch, its
// only bound an AbortSignal.timeout(ms) per call (the attempt limit, or the
// read interval or connect bound where the policy has no attempt limit),
// no retry layer (the contracts whose point is a retry are not configurable).
//
//   connaudit serve -- node kits/node/example_fetch.mjs
//
// Each scenario gets a dispatcher of its own: an undici Agent as fetch's
// global one is (built-in undici's own class: Node has no undici module to
// import), with its defaults but the trust store (connect.ca:
// $CONNAUDIT_CA), closed when the scenario ends. Its keepAliveTimeout, 4 s by
// default, is how long it keeps an idle connection before it closes it
// itself; a server's "Keep-Alive: timeout=N" makes it N s less
// keepAliveTimeoutThreshold (2 s), at most keepAliveMaxTimeout (600 s), and
// no reuse at all when that is not above 0 (undici 6's client-h1). undici has
// no HTTP/2 health check (PING) to configure.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadTerms, main, NotConfigurable } from './kit.mjs';

// Built-in fetch makes its global dispatcher at its first call: a data: URL
// makes it without a connection.
await (await fetch('data:,')).arrayBuffer();
const Agent = globalThis[Symbol.for('undici.globalDispatcher.1')].constructor;

// keepAliveTimeout is undici's default, said explicitly.
const keepAliveTimeout = 4000;
const ca = process.env.CONNAUDIT_CA ? fs.readFileSync(process.env.CONNAUDIT_CA) : undefined;

export const fetchAdapter = {
  name: 'fetch',
  terms: loadTerms('fetch'),
  version: `node ${process.versions.node} (undici ${process.versions.undici})`,
  config: 'fetch(url, {signal: AbortSignal.timeout(ms), dispatcher: new Agent({keepAliveTimeout: 4000})}), no retry layer',
  protocols: ['http1'],
  idleTimeoutMs: keepAliveTimeout,
  open(sc) {
    const p = sc.policy;
    if (sc.expect.attempts > 1) throw new NotConfigurable('fetch retries nothing, and this example adds no retry layer');
    if (p.pool_max_per_host) throw new NotConfigurable("undici's Agent({connections: 1}) queues a second caller with no acquire timeout but the call's own signal");
    const ms = p.attempt_timeout_ms || p.read_timeout_ms || Math.max(p.connect_timeout_ms, p.tls_timeout_ms);
    const dispatcher = new Agent({ keepAliveTimeout, connect: ca ? { ca } : undefined });
    let connauditConfig = `${ms ? `AbortSignal.timeout(${ms})` : 'no timeout'}, Agent({keepAliveTimeout: ${keepAliveTimeout}})`;
    if (p.send_ping_timeout_ms) connauditConfig += '; undici has no HTTP/2 PING health check';
    return { ms, dispatcher, connauditConfig };
  },
  async send(c, sc, { method, url, headers, body, readBytes, signal }) {
    const signals = [];
    if (c.ms) signals.push(AbortSignal.timeout(c.ms));
    if (signal) signals.push(signal);
    try {
      const res = await fetch(url, { method, headers: body ? { ...headers, 'Content-Type': 'application/json' } : headers,
        body: body || undefined, signal: signals.length ? AbortSignal.any(signals) : undefined, dispatcher: c.dispatcher });
      const reader = res.body.getReader();
      let n = 0;
      for (;;) {
        if (readBytes !== undefined && n >= readBytes) {
          await reader.cancel();
          break;
        }
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
      }
      return { status: res.status, attempts: 1 };
    } catch (e) {
      e.connauditAttempts = 1; // no retry layer: one attempt, ended in this error
      throw e;
    }
  },
  kind(e) {
    if (e.name === 'TimeoutError') return 'timeout';
    if (e.name === 'AbortError') return 'canceled';
    const code = e.cause?.code || e.code || '';
    if (/UND_ERR_(HEADERS|BODY|CONNECT)_TIMEOUT|ETIMEDOUT/.test(code)) return 'timeout';
    if (e.name === 'TypeError' && e.message === 'fetch failed') return 'connection';
    if (/ECONN|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED|terminated/.test(code + e.message)) return 'connection';
    return 'other';
  },
  async close(c) {
    await c.dispatcher.destroy();
  },
};

// Run only as the entry point: a script that imports the adapter (to run
// an edited copy of it) runs its own.
if (process.argv[1] === fileURLToPath(import.meta.url)) await main(fetchAdapter);
