// What undici (the package pinned in package.json) really does, measured
// against raw-socket servers (rawserver.mjs; no connaudit serve): the
// requests the server read and those it closed unread, the connections it
// accepted, and what the caller got, pinned. Each client is configured by
// its example (example_undici*.mjs) and called as the kit calls it (a 0 ms
// timer before each call: Kit.outcome), unless a test says otherwise. The
// examples' comments, the terms and docs/serve.md's prose rest on these.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, RetryAgent, request } from 'undici';
import { Kit } from '../kit.mjs';
import { agentOptions, counting, send, undiciAdapter } from '../example_undici.mjs';
import { undiciRetryAdapter } from '../example_undici_retry.mjs';
import { undiciDefaultAdapter } from '../example_undici_default.mjs';
import { RawServer } from '../rawserver.mjs';

const kit = new Kit('http://127.0.0.1:9/unused');
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

function scenario(policy = {}, method = 'GET', headers = {}) {
  return { name: 'truth', expect: { attempts: 1 }, request: { method, headers, body: method === 'POST' ? '{"order":7}' : '' },
    policy: { attempt_timeout_ms: 0, total_timeout_ms: 0, max_retries: 0, delay_ms: 0, retry_statuses: [],
      retry_errors: false, retry_methods: ['GET', 'HEAD'], retry_with_idempotency_key: false, retry_any_method: false,
      connect_timeout_ms: 0, read_timeout_ms: 5000, tls_timeout_ms: 0, pool_max_per_host: 0, pool_acquire_timeout_ms: 0,
      ...policy } };
}

// calls sends methods (GET, POST) in order through one client the adapter
// configures from sc, as the kit does; it returns each call's outcome
// ({status} or {error: {kind, message}}) and attempts, and the server.
async function calls(adapter, sc, act, methods) {
  const srv = await new RawServer(act).listen();
  const c = adapter.open(sc);
  const outs = [];
  try {
    for (const method of methods) {
      outs.push(await kit.outcome(adapter, () => adapter.send(c, sc, { method, url: `${srv.url}/x`,
        headers: sc.request.headers, body: method === 'POST' ? '{"order":7}' : '' })));
    }
  } finally {
    await adapter.close(c);
    await srv.close();
  }
  return { outs, last: outs.at(-1), srv };
}

const second = (what) => (n, i) => (n === 1 && i === 2 ? what : 'ok');

test('undici: back to back, with no turn between, the next call opens another connection', async () => {
  // A call sent in the same turn as the previous body's end does not get
  // its connection: 3 calls, 2 connections; with the kit's turn, 1.
  const srv = await new RawServer(() => 'ok').listen();
  const sc = scenario();
  const c = undiciAdapter.open(sc);
  try {
    for (let i = 0; i < 3; i++) await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' });
  } finally {
    await undiciAdapter.close(c);
  }
  assert.deepEqual([srv.requests, srv.conns], [3, 2]);
  await srv.close();
  const { srv: s2 } = await calls(undiciAdapter, sc, () => 'ok', ['GET', 'GET', 'GET']);
  assert.deepEqual([s2.requests, s2.conns], [3, 1]);
});

for (const [how, message] of [['fin', 'SocketError: other side closed'], ['rst', 'Error: read ECONNRESET']]) {
  test(`undici: a kept-alive GET the server read, then ${how}: the caller's loss, not sent again`, async () => {
    const { last, srv } = await calls(undiciAdapter, scenario(), second(how), ['GET', 'GET']);
    assert.deepEqual(last.out, { error: { kind: 'connection', message } });
    assert.equal(last.attempts, 1);
    assert.deepEqual([srv.requests, srv.unread, srv.conns], [2, 0, 1]);
  });

  test(`undici: a kept-alive GET closed (${how}) as it arrives, unread: the caller's loss`, async () => {
    const { last, srv } = await calls(undiciAdapter, scenario(), second(`unread-${how}`), ['GET', 'GET']);
    assert.deepEqual(last.out, { error: { kind: 'connection', message } });
    assert.deepEqual([srv.requests, srv.unread, srv.conns], [1, 1, 1]);
  });

  test(`undici: a kept-alive POST the server read, then ${how}: read once, the caller's loss`, async () => {
    const { last, srv } = await calls(undiciAdapter, scenario({}, 'POST'), second(how), ['GET', 'POST']);
    assert.deepEqual(last.out, { error: { kind: 'connection', message } });
    assert.deepEqual(srv.methods, ['GET', 'POST']);
    assert.deepEqual([srv.unread, srv.conns], [0, 1]);
  });
}

test('undici: a connection the server closed (FIN) while idle is not reused: the next call goes on a new one', async () => {
  // The FIN is sent as the call starts, after the turn: undici lets a
  // setImmediate pass before it writes on an idle connection, sees the
  // close, and dials anew.
  const srv = await new RawServer(() => 'ok').listen();
  const sc = scenario();
  const c = undiciAdapter.open(sc);
  let status;
  try {
    await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' });
    await turn();
    srv.closeIdle(1, 'fin');
    status = (await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' })).status;
  } finally {
    await undiciAdapter.close(c);
    await srv.close();
  }
  assert.equal(status, 200);
  assert.deepEqual([srv.requests, srv.conns], [2, 2]);
});

test('undici: a connection reset (RST) while idle fails the call waiting for it, none of it written', async () => {
  // The same with an RST: the reset reaches the idle connection while the
  // call waits for undici's check, and undici fails every call queued on
  // it (ECONNRESET is no SocketError): 0 requests read, no new connection.
  const srv = await new RawServer(() => 'ok').listen();
  const sc = scenario();
  const c = undiciAdapter.open(sc);
  let got;
  try {
    await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' });
    await turn();
    srv.closeIdle(1, 'rst');
    got = await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' }).catch((e) => e);
  } finally {
    await undiciAdapter.close(c);
    await srv.close();
  }
  assert.equal(got.code, 'ECONNRESET');
  assert.equal(undiciAdapter.kind(got), 'connection');
  assert.deepEqual([srv.requests, srv.conns], [1, 1]);
});

test('undici: a connection reset while idle, a turn before the call: the call goes on a new one', async () => {
  const srv = await new RawServer(() => 'ok').listen();
  const sc = scenario();
  const c = undiciAdapter.open(sc);
  let status;
  try {
    await send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' });
    await turn();
    srv.closeIdle(1, 'rst');
    status = (await kit.outcome(undiciAdapter, () => send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' }))).out;
  } finally {
    await undiciAdapter.close(c);
    await srv.close();
  }
  assert.deepEqual(status, { status: 200 });
  assert.deepEqual([srv.requests, srv.conns], [2, 2]);
});

test('undici: a body left unconsumed holds its connection when it outgrows the buffers, not when it fits', async () => {
  for (const [act, requestsWhileHeld, conns] of [['big', 1, 1], ['ok', 2, 1]]) {
    // connections: 1; the first response's body is not read; a second call
    // starts. A body of 2 bytes is read into the stream's buffer and the
    // connection is free: the second call is sent on it. A body of 1 MiB
    // holds it: the second call waits in the queue, unsent, until the
    // first body is read to its end, then goes on the same connection.
    const srv = await new RawServer(() => act).listen();
    const agent = new Agent(agentOptions(scenario({ pool_max_per_host: 1 }).policy).opts);
    try {
      const first = await request(`${srv.url}/x`, { dispatcher: agent });
      await turn();
      let sent = false;
      const next = request(`${srv.url}/y`, { dispatcher: agent }).then(async (r) => {
        for await (const _ of r.body);
        sent = true;
        return r.statusCode;
      });
      next.catch(() => {}); // awaited below; an assertion before it must not leave it unhandled
      // Wait for the server to read the second call, 50 turns at most:
      // held, it is still queued in the pool (pending) after them.
      for (let i = 0; i < 50 && srv.requests < 2; i++) await turn();
      assert.equal(srv.requests, requestsWhileHeld, `${act}: requests read while the first body is unread`);
      assert.equal(agent.stats[srv.url].pending, 2 - requestsWhileHeld, `${act}: calls queued`);
      for await (const _ of first.body);
      assert.equal(await next, 200);
      assert.ok(sent);
      assert.deepEqual([srv.requests, srv.conns], [2, conns], act);
    } finally {
      await agent.destroy();
      await srv.close();
    }
  }
});

test("undici: a server's Keep-Alive: timeout=2 leaves no reuse (2 s less keepAliveTimeoutThreshold, 2 s); timeout=5 is reused", async () => {
  const { srv: s2 } = await calls(undiciAdapter, scenario(), () => 'ka:2', ['GET', 'GET']);
  assert.deepEqual([s2.requests, s2.conns], [2, 2]);
  const { srv: s5 } = await calls(undiciAdapter, scenario(), () => 'ka:5', ['GET', 'GET']);
  assert.deepEqual([s5.requests, s5.conns], [2, 1]);
});

test('undici: headersTimeout ends a stalled response and closes its connection', async () => {
  const sc = scenario({ read_timeout_ms: 200 });
  const srv = await new RawServer(() => 'stall').listen();
  const c = undiciAdapter.open(sc);
  let r;
  try {
    r = await kit.outcome(undiciAdapter, () => send(c, sc, { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' }));
    await srv.closedAtLeast(1);
  } finally {
    await undiciAdapter.close(c);
    await srv.close();
  }
  assert.equal(r.out.error.kind, 'timeout');
  assert.match(r.out.error.message, /HeadersTimeoutError/);
  assert.deepEqual([srv.requests, srv.conns, srv.closed], [1, 1, 1]);
});

// The retry examples.

test('undici-retry: 503, 503, 200 under the policy: 3 attempts counted, 3 requests on 2 connections', async () => {
  // RetryAgent sends a retry as the 503's body ends, in the same turn: its
  // connection is not yet free, and the retry goes on another (the 2nd
  // attempt on a new connection, the 3rd on the first again).
  const sc = scenario({ max_retries: 2, retry_statuses: [503], delay_ms: 10 });
  let k = 0;
  const { last, srv } = await calls(undiciRetryAdapter, sc, () => (++k < 3 ? '503' : 'ok'), ['GET']);
  assert.deepEqual(last.out, { status: 200 });
  assert.equal(last.attempts, 3);
  assert.deepEqual([srv.requests, srv.conns], [3, 2]);
});

test('undici-retry: 503 when the retries run out is handed back (throwOnError: false)', async () => {
  const sc = scenario({ max_retries: 2, retry_statuses: [503], delay_ms: 10 });
  const { last, srv } = await calls(undiciRetryAdapter, sc, () => '503', ['GET']);
  assert.deepEqual(last.out, { status: 503 });
  assert.equal(last.attempts, 3);
  assert.deepEqual([srv.requests, srv.conns], [3, 2]);
});

test('undici-retry: errorCodes: [] leaves a kept-alive GET the server read, then closed, to the caller', async () => {
  const sc = scenario({ max_retries: 2, retry_statuses: [503], delay_ms: 10 });
  const { last, srv } = await calls(undiciRetryAdapter, sc, second('fin'), ['GET', 'GET']);
  assert.deepEqual(last.out, { error: { kind: 'connection', message: 'SocketError: other side closed' } });
  assert.equal(last.attempts, 1);
  assert.deepEqual([srv.requests, srv.conns], [2, 1]);
});

test('undici-retry: a POST the policy lets it replay (any method) is sent twice on a 503', async () => {
  const sc = scenario({ max_retries: 1, retry_statuses: [503], retry_any_method: true }, 'POST');
  let k = 0;
  const { last, srv } = await calls(undiciRetryAdapter, sc, () => (++k === 1 ? '503' : 'ok'), ['POST']);
  assert.deepEqual(last.out, { status: 200 });
  assert.equal(last.attempts, 2);
  assert.deepEqual(srv.methods, ['POST', 'POST']);
});

test("undici-default: RetryAgent's defaults send a kept-alive GET the server read, then closed, again (UND_ERR_SOCKET)", async () => {
  // 500 ms later (minTimeout), on a new connection: 1 call, 2 attempts, the
  // GET read twice, and the caller gets the 200.
  const { last, srv } = await calls(undiciDefaultAdapter, scenario(), second('fin'), ['GET', 'GET']);
  assert.deepEqual(last.out, { status: 200 });
  assert.equal(last.attempts, 2);
  assert.deepEqual([srv.requests, srv.conns], [3, 2]);
});

test("undici-default: RetryAgent's defaults send a kept-alive POST's loss to the caller (POST is not in methods)", async () => {
  const { last, srv } = await calls(undiciDefaultAdapter, scenario({}, 'POST'), second('fin'), ['GET', 'POST']);
  assert.deepEqual(last.out, { error: { kind: 'connection', message: 'SocketError: other side closed' } });
  assert.equal(last.attempts, 1);
  assert.deepEqual(srv.methods, ['GET', 'POST']);
});

test("undici-default: RetryAgent's defaults give up on a stalled response (UND_ERR_HEADERS_TIMEOUT is not retried)", async () => {
  const { last, srv } = await calls(undiciDefaultAdapter, scenario({ read_timeout_ms: 200 }), () => 'stall', ['GET']);
  assert.equal(last.out.error.kind, 'timeout');
  assert.equal(last.attempts, 1);
  assert.deepEqual([srv.requests, srv.conns], [1, 1]);
});

test('RetryAgent throwOnError (its default) throws the last 503 as RequestRetryError after maxRetries + 1 requests', async () => {
  // RetryAgent's defaults but its delays (500 ms doubling: 15.5 s for 5
  // retries), cut to 1 ms here.
  const srv = await new RawServer(() => '503').listen();
  const agent = new RetryAgent(counting(new Agent()), { minTimeout: 1, maxTimeout: 1 });
  const c = { dispatcher: agent };
  let got;
  try {
    got = await send(c, scenario(), { method: 'GET', url: `${srv.url}/x`, headers: {}, body: '' }).catch((e) => e);
  } finally {
    await agent.destroy();
    await srv.close();
  }
  assert.equal(got.name, 'RequestRetryError');
  assert.equal(got.statusCode, 503);
  assert.equal(got.connauditAttempts, 6);
  assert.equal(undiciDefaultAdapter.kind(got), 'other');
  assert.deepEqual([srv.requests, srv.conns], [6, 1]);
});
