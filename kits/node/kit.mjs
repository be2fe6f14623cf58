// The Node kit of connaudit serve (docs/serve.md, connaudit.serve/v1).
//
// A kit is thin: it speaks the protocol, configures the client under test
// from each scenario's policy (through an adapter), runs the scenario's
// steps and reports what the caller got. The server judges.
//
//   const report = await new Kit().run(adapter)   // a script, or a node:test test
//
// An adapter has name, version, config, protocols, idleTimeoutMs (optional:
// how long the client keeps an idle connection before it closes it itself,
// as configured; 0 when it never does, undefined when unknown), terms
// (optional: what fixes each failure in the client's own terms, sent as
// client.terms; loadTerms(name) reads kits/node/NAME.terms.json), and
//   open(scenario) -> client          a new client (its own pool) for the
//                                      scenario's policy;
//                                      throw new NotConfigurable(why)
//   send(client, scenario, {method, url, headers, body, readBytes, signal})
//       -> {status, attempts}          reads the body (readBytes of it, then
//                                      stops); throws the client's own errors,
//                                      which may carry the call's attempts in
//                                      connauditAttempts
//   kind(err) -> "timeout" | "connection" | "canceled" | "pool" | "other"
//   statusOf(err) -> status | undefined  (optional) the status of a response
//                                      the client rejected (axios'
//                                      validateStatus): a response is a
//                                      status, not an error
//   close(client)
//
// The kit lets a 0 ms timer pass before each call of the client's: undici
// (fetch) gives a connection back to its pool only a turn of the event loop
// after the response's body ended, so a call sent in that same turn opens
// another connection (measured: serve/truth_test.go, keepalive-disconnect),
// and after a reconnect one setImmediate is not enough (measured: a 5th
// request after a Connection: close on the 3rd opened a third connection
// with it, none with a timer). An application that does anything between
// two requests lets that pass, and the scenarios' faults are then on the
// connection the warm-up left.
//
// A warm-up that fails ends the scenario: its error is reported as the
// outcome (the message says which warm-up), then /ok is sent as always.
//
// The control requests go through http.request, never the client under test.

import fs from 'node:fs';
import http from 'node:http';

export const PROTOCOL = 'connaudit.serve/v1';

export class NotConfigurable extends Error {}

// loadTerms reads the terms declaration of the client name beside this
// file, NAME.terms.json (docs/serve.md: client.terms).
export function loadTerms(name) {
  return JSON.parse(fs.readFileSync(new URL(`./${name}.terms.json`, import.meta.url), 'utf8'));
}

export class KitError extends Error {}

// turn lets a 0 ms timer pass.
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

// ctl sends a control request through an agent of the kit's own.
const ctlAgent = new http.Agent({ keepAlive: false });
function ctl(method, url, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(url, { method, agent: ctlAgent, timeout: 30000,
      headers: { 'Content-Type': 'application/json', ...(data ? { 'Content-Length': data.length } : {}) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode < 200 || res.statusCode > 299) {
          reject(new KitError(`${method} ${url}: ${res.statusCode} ${text}`));
          return;
        }
        try { resolve(JSON.parse(text || '{}')); } catch (e) { reject(e); }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new KitError(`${method} ${url}: no answer in 30s`)));
    req.on('error', reject);
    req.end(data);
  });
}

export class Kit {
  constructor(url = process.env.CONNAUDIT_URL, ca = process.env.CONNAUDIT_CA) {
    if (!url) throw new KitError('CONNAUDIT_URL is not set: run under connaudit serve -- CMD');
    this.url = url;
    this.ca = ca;
  }

  // run audits adapter's client on every scenario offered and returns the
  // session's report, whose ok says whether every verdict passed.
  async run(adapter, { run = process.env.CONNAUDIT_RUN || '', skip = process.env.CONNAUDIT_SKIP || '' } = {}) {
    const client = { name: adapter.name, version: adapter.version, config: adapter.config };
    if (adapter.idleTimeoutMs !== undefined) client.idle_timeout_ms = adapter.idleTimeoutMs;
    if (adapter.terms) client.terms = adapter.terms;
    const opened = await ctl('POST', `${this.url}/v1/sessions`, {
      protocol: PROTOCOL, kit: 'node', client, protocols: adapter.protocols, run, skip,
    });
    const { scenarios } = await ctl('GET', opened.scenarios_url);
    for (const sc of scenarios) {
      await ctl('POST', opened.report_url, await this.scenario(adapter, sc));
    }
    return ctl('POST', opened.done_url, {});
  }

  // outcome runs the call fn, a turn after the last, and says what the
  // caller got.
  async outcome(adapter, fn) {
    await turn();
    const start = performance.now();
    let out;
    let attempts;
    try {
      const r = await fn();
      out = { status: r.status };
      attempts = r.attempts;
    } catch (e) {
      if (e instanceof NotConfigurable) throw e;
      const status = adapter.statusOf?.(e);
      out = status !== undefined ? { status }
        : { error: { kind: adapter.kind(e), message: `${e.name}: ${e.message}${e.cause ? ` (${e.cause.code || e.cause.message})` : ''}`.slice(0, 1024) } };
      attempts = e?.connauditAttempts;
    }
    return { out, ms: performance.now() - start, attempts };
  }

  async scenario(adapter, sc) {
    const name = sc.name;
    let client;
    try {
      client = await adapter.open(sc);
    } catch (e) {
      if (e instanceof NotConfigurable) return { scenario: name, not_configurable: e.message, elapsed_ms: 0 };
      throw e;
    }
    try {
      const req = (url, extra = {}) => adapter.send(client, sc, { method: sc.request.method, url, headers: sc.request.headers,
        body: sc.request.body, ...extra });
      const get = (url, extra = {}) => adapter.send(client, sc, { method: 'GET', url, headers: {}, body: '', ...extra });
      // warm sends the warm-ups; it returns the outcome of the first that
      // failed, if one did.
      const warm = async () => {
        const n = Math.max(1, sc.warm_requests || 1);
        for (let i = 0; i < n; i++) {
          const w = await this.outcome(adapter, () => get(sc.warm_url || sc.url));
          if (w.out.error) {
            w.out.error.message = `warm-up ${i + 1} of ${n}: ${w.out.error.message}`;
            return w;
          }
        }
        return undefined;
      };
      let r;
      switch (sc.steps) {
        case 'request':
          r = await this.outcome(adapter, () => req(sc.url));
          break;
        case 'warm-then-request':
          r = await warm() || await this.outcome(adapter, () => req(sc.url));
          break;
        case 'warm-close-then-request':
          r = await warm();
          if (r) break;
          await ctl('POST', sc.close_url, {});
          r = await this.outcome(adapter, () => req(sc.url));
          break;
        case 'read-then-close':
          r = await this.outcome(adapter, () => req(sc.url, { readBytes: sc.read_bytes }));
          break;
        case 'second-caller': {
          const holder = this.outcome(adapter, () => get(sc.hold_url));
          await ctl('GET', sc.entered_url);
          r = await this.outcome(adapter, () => req(sc.url));
          await holder;
          break;
        }
        case 'cancel-when-entered': {
          const ac = new AbortController();
          const call = this.outcome(adapter, () => req(sc.url, { signal: ac.signal }));
          await ctl('GET', sc.entered_url);
          ac.abort();
          r = await call;
          break;
        }
        default:
          return { scenario: name, skipped: `steps ${sc.steps} unknown to the Node kit`, elapsed_ms: 0 };
      }
      if (sc.settle_url) await ctl('POST', sc.settle_url, {});
      const ok = await this.outcome(adapter, () => get(sc.ok_url));
      const rep = { scenario: name, outcome: r.out, elapsed_ms: r.ms, ok: { ...ok.out, elapsed_ms: ok.ms },
        config: client.connauditConfig || '' };
      if (r.attempts !== undefined) rep.attempts = r.attempts;
      return rep;
    } catch (e) {
      if (e instanceof NotConfigurable) return { scenario: name, not_configurable: e.message, elapsed_ms: 0 };
      throw e;
    } finally {
      await adapter.close(client);
    }
  }
}

// main runs the kit on adapter and sets the exit code: 0 if ok.
export async function main(adapter) {
  const report = await new Kit().run(adapter);
  console.log(`connaudit kit: ${adapter.name}: ${report.passed} passed, ${report.failed} failed, ${report.not_configurable} not configurable`);
  process.exitCode = report.ok ? 0 : 1;
  return report;
}
