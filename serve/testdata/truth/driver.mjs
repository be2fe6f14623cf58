// Drives one real Node client against the truth server: node driver.mjs
// CLIENT CASE URL; prints one line per call: "status N" or "error NAME:
// message (code)".
const [client, kase, url] = process.argv.slice(2);
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
