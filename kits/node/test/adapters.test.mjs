// The example adapters without connaudit serve: what they make of a
// client's own results, against a loopback server of the test's own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import axios from 'axios';
import { Kit } from '../kit.mjs';
import { axiosAdapter } from '../example_axios.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

// serve503 runs fn with the URL of a server that answers every request 503.
async function serve503(fn) {
  const srv = http.createServer((req, res) => {
    req.resume();
    res.writeHead(503, { 'Content-Length': 2 }).end('no');
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  try {
    return await fn(`http://127.0.0.1:${srv.address().port}/x`);
  } finally {
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  }
}

test('a 503 axios rejects (validateStatus) is a status, not a connection error', async () => {
  await serve503(async (url) => {
    const agent = new http.Agent({ keepAlive: false });
    let err;
    try {
      await axios.get(url, { httpAgent: agent });
    } catch (e) {
      err = e;
    } finally {
      agent.destroy();
    }
    assert.equal(err?.code, 'ERR_BAD_RESPONSE');
    assert.notEqual(axiosAdapter.kind(err), 'connection');
    const r = await new Kit('http://127.0.0.1:9/unused').outcome(axiosAdapter, () => Promise.reject(err));
    assert.deepEqual(r.out, { status: 503 });
  });
});

test('the axios adapter hands back a 503 its retry condition does not retry', async () => {
  await serve503(async (url) => {
    // A POST under a policy that retries 503 for GET only: validateStatus
    // rejects the 503, and axios-retry does not retry it.
    const sc = { name: 'w4', request: { method: 'POST', headers: {}, body: '{}' },
      policy: { max_retries: 2, retry_statuses: [503], retry_methods: ['GET', 'HEAD'], retry_any_method: false,
        retry_with_idempotency_key: false, retry_errors: false, delay_ms: 0, attempt_timeout_ms: 3000,
        read_timeout_ms: 0, connect_timeout_ms: 0, tls_timeout_ms: 0, pool_max_per_host: 0 } };
    const client = axiosAdapter.open(sc);
    try {
      const r = await new Kit('http://127.0.0.1:9/unused').outcome(axiosAdapter,
        () => axiosAdapter.send(client, sc, { method: 'POST', url, headers: {}, body: '{}' }));
      assert.deepEqual(r.out, { status: 503 });
      assert.equal(r.attempts, 1);
    } finally {
      axiosAdapter.close(client);
    }
  });
});

test('importing example_fetch.mjs runs nothing: an example runs main only as the entry point', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kit-'));
  try {
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, 'not a certificate\n');
    const example = path.join(here, '..', 'example_fetch.mjs');
    const env = { ...process.env, CONNAUDIT_CA: ca };
    delete env.CONNAUDIT_URL;
    delete env.NODE_EXTRA_CA_CERTS;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e',
      `const { fetchAdapter } = await import(${JSON.stringify(example)}); console.log('imported', fetchAdapter.name);`],
    { env, encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'imported fetch');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
