// The Node kit from node:test: each example client audited by the
// connaudit serve that runs this test (connaudit serve -- node --test
// kits/node/test/). Each test asserts that the session was run to its end
// — every scenario reported, no error; the verdicts are connaudit's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kit } from '../kit.mjs';
import { axiosAdapter } from '../example_axios.mjs';
import { undiciAdapter } from '../example_undici.mjs';
import { undiciRetryAdapter } from '../example_undici_retry.mjs';

const skip = process.env.CONNAUDIT_URL ? false : 'run under connaudit serve -- node --test';

test('axios with axios-retry', { skip }, async () => {
  const report = await new Kit().run(axiosAdapter);
  assert.equal(report.not_reported, 0, JSON.stringify(report));
  assert.ok(!report.error, report.error);
  assert.ok(report.results.length > 0);
});

// undici's examples but the default one, whose RetryAgent retries a 503
// five times with 15.5 s of delays (kits/examples.sh runs it).
for (const [name, adapter] of [['undici.request on an Agent', undiciAdapter], ['undici RetryAgent from the policy', undiciRetryAdapter]]) {
  test(name, { skip }, async () => {
    const report = await new Kit().run(adapter);
    assert.equal(report.not_reported, 0, JSON.stringify(report));
    assert.ok(!report.error, report.error);
    assert.ok(report.results.length > 0);
  });
}

test('the kit refuses to run without CONNAUDIT_URL', () => {
  assert.throws(() => new Kit(''), /CONNAUDIT_URL/);
});
