// Drives one real Node client against the truth server: node driver.mjs
// CLIENT CASE URL; prints one line per call: "status N" or "error NAME:
// message (code)".
//
// CASE "calls" runs the calls of $TRUTH_CALLS (space-separated: GET, POST, a
// POST of {"order":7}, POSTK, the same with Idempotency-Key: order-7, GATE, a
// GET of $TRUTH_GATE through http.get with no agent, not the client, WAIT,
// the same with ?wait=6s) with a
// bound of $TRUTH_BOUND_MS, through the client configured as kits/node's
// example configures it for a scenario with no retries; with TRUTH_TURN=1 a
// 0 ms timer passes between two calls, as the kit lets it.
import http from 'node:http';

const [client, kase, url] = process.argv.slice(2);

if (kase === 'calls') {
  const calls = process.env.TRUTH_CALLS.split(' ');
  const bound = Number(process.env.TRUTH_BOUND_MS);
  const headers = { POST: { 'Content-Type': 'application/json' },
    POSTK: { 'Content-Type': 'application/json', 'Idempotency-Key': 'order-7' } };
  let call;
  let done = () => {};
  if (client === 'fetch') {
    // example_fetch.mjs: fetch with AbortSignal.timeout and a dispatcher of
    // its own, an undici Agent as the global one, no retry layer.
    await (await fetch('data:,')).arrayBuffer();
    const Agent = globalThis[Symbol.for('undici.globalDispatcher.1')].constructor;
    const dispatcher = new Agent({ keepAliveTimeout: 4000 });
    call = async (method, h) => {
      const res = await fetch(url, { method, headers: h, body: method === 'POST' ? '{"order":7}' : undefined,
        signal: AbortSignal.timeout(bound), dispatcher });
      const reader = res.body.getReader();
      for (;;) {
        const { done: end } = await reader.read();
        if (end) break;
      }
      return res.status;
    };
  } else if (client === 'axios') {
    // example_axios.mjs for a policy of no retries.
    const { createRequire } = await import('node:module');
    const require = createRequire(`${process.env.CONNAUDIT_NODE_KIT}/package.json`);
    const axios = require('axios');
    const axiosRetry = require('axios-retry').default || require('axios-retry');
    const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    const c = axios.create({ timeout: bound, httpAgent: agent, validateStatus: () => true, maxRedirects: 0 });
    axiosRetry(c, { retries: 0, retryDelay: () => 0, retryCondition: () => false, shouldResetTimeout: true });
    call = async (method, h) => {
      const res = await c.request({ method, url, headers: h, data: method === 'POST' ? '{"order":7}' : undefined,
        responseType: 'stream' });
      await new Promise((resolve, reject) => {
        res.data.on('data', () => {});
        res.data.on('end', resolve);
        res.data.on('error', reject);
      });
      return res.status;
    };
    done = () => agent.destroy();
  } else {
    console.error(`unknown client ${client}`);
    process.exit(2);
  }
  for (const c of calls) {
    if (c === 'GATE' || c === 'WAIT') {
      await new Promise((resolve, reject) => {
        http.get(process.env.TRUTH_GATE + (c === 'WAIT' ? '?wait=6s' : ''), { agent: false }, (res) => {
          res.resume();
          res.on('end', resolve);
        }).on('error', reject);
      });
      continue;
    }
    try {
      console.log(`status ${await call(c === 'GET' ? 'GET' : 'POST', headers[c] || {})}`);
    } catch (e) {
      console.log(line(e));
    }
    if (process.env.TRUTH_TURN === '1') await new Promise((resolve) => setTimeout(resolve, 0));
  }
  done();
  process.exit(0);
}
const post = kase.startsWith('post');
// The bound: 200 ms where the fault stalls, 5 s elsewhere (a loaded
// machine's slow first call must not look like a timeout).
const bound = kase.startsWith('stall') ? 200 : 5000;
const retry = ['503-503-200', 'post-503', '500-retry', 'stall-retry'].includes(kase);

function line(e) {
  return `error ${e.name}: ${e.message} (${e.code || e.cause?.code || ''})`.replace(/\n/g, ' ');
}

let call;
let done = () => {};
if (client === 'fetch') {
  call = async () => {
    const res = await fetch(url, { method: post ? 'POST' : 'GET', body: post ? '{"order":7}' : undefined,
      signal: AbortSignal.timeout(bound) });
    await res.arrayBuffer();
    return res.status;
  };
} else if (client === 'axios') {
  // The kit's pinned axios and axios-retry (kits/node/node_modules).
  const { createRequire } = await import('node:module');
  const require = createRequire(`${process.env.CONNAUDIT_NODE_KIT}/package.json`);
  const axios = require('axios');
  const axiosRetry = require('axios-retry').default || require('axios-retry');
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true });
  const c = axios.create({ timeout: bound, httpAgent: agent });
  // axios-retry as a team sets it: 2 retries, its default retryCondition
  // (network errors, and 5xx of idempotent requests).
  if (retry) axiosRetry(c, { retries: 2, retryDelay: () => 0 });
  call = async () => {
    try {
      const res = await c.request({ method: post ? 'POST' : 'GET', url, data: post ? '{"order":7}' : undefined });
      return res.status;
    } catch (e) {
      if (e.response) return e.response.status;
      throw e;
    }
  };
  done = () => agent.destroy();
} else {
  console.error(`unknown client ${client}`);
  process.exit(2);
}

const n = kase === 'keepalive-disconnect' ? 2 : 1;
for (let i = 0; i < n; i++) {
  try {
    console.log(`status ${await call()}`);
  } catch (e) {
    console.log(line(e));
  }
}
done();
