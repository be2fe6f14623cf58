// An example client audited by connaudit serve: Node's built-in fetch, its
// only bound an AbortSignal.timeout(ms) per call (the attempt limit, or the
// read interval or connect bound where the policy has no attempt limit),
// no retry layer (the contracts whose point is a retry are not configurable).
//
//   connaudit serve -- node kits/node/example_fetch.mjs
//
// Built-in fetch takes its trust store at start: this script re-runs itself
// with NODE_EXTRA_CA_CERTS=$CONNAUDIT_CA.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { main, NotConfigurable } from './kit.mjs';

if (process.env.CONNAUDIT_CA && process.env.NODE_EXTRA_CA_CERTS !== process.env.CONNAUDIT_CA) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], { stdio: 'inherit',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: process.env.CONNAUDIT_CA } });
  process.exit(r.status ?? 1);
}

export const fetchAdapter = {
  name: 'fetch',
  version: `node ${process.versions.node} (undici ${process.versions.undici})`,
  config: 'fetch(url, {signal: AbortSignal.timeout(ms)}), the global dispatcher, no retry layer',
  protocols: ['http1'],
  open(sc) {
    const p = sc.policy;
    if (sc.expect.attempts > 1) throw new NotConfigurable('fetch retries nothing, and this example adds no retry layer');
    if (p.pool_max_per_host) throw new NotConfigurable("built-in fetch's global dispatcher has no pool of one");
    const ms = p.attempt_timeout_ms || p.read_timeout_ms || Math.max(p.connect_timeout_ms, p.tls_timeout_ms);
    return { ms, connauditConfig: ms ? `AbortSignal.timeout(${ms})` : 'no timeout' };
  },
  async send(c, sc, { method, url, headers, body, readBytes, signal }) {
    const signals = [];
    if (c.ms) signals.push(AbortSignal.timeout(c.ms));
    if (signal) signals.push(signal);
    const res = await fetch(url, { method, headers: body ? { ...headers, 'Content-Type': 'application/json' } : headers,
      body: body || undefined, signal: signals.length ? AbortSignal.any(signals) : undefined });
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
  close() {},
};

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(fetchAdapter);
