// The Node kit of connaudit serve (docs/serve.md, connaudit.serve/v1).
//
// A kit is thin: it speaks the protocol, configures the client under test
// from each scenario's policy (through an adapter), runs the scenario's
// steps and reports what the caller got. The server judges.
//
//   const report = await new Kit().run(adapter)   // a script, or a node:test test
//
// An adapter has name, version, config, protocols, and
//   open(scenario) -> client          a new client for the scenario's policy;
//                                      throw new NotConfigurable(why)
//   send(client, scenario, {method, url, headers, body, readBytes, signal})
//       -> {status, attempts}          reads the body (readBytes of it, then
//                                      stops); throws the client's own errors
//   kind(err) -> "timeout" | "connection" | "canceled" | "pool" | "other"
//   close(client)
//
// The control requests go through http.request, never the client under test.

import http from 'node:http';

export const PROTOCOL = 'connaudit.serve/v1';

export class NotConfigurable extends Error {}

export class KitError extends Error {}

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
    const opened = await ctl('POST', `${this.url}/v1/sessions`, {
      protocol: PROTOCOL, kit: 'node', client: { name: adapter.name, version: adapter.version, config: adapter.config },
      protocols: adapter.protocols, run, skip,
    });
    const { scenarios } = await ctl('GET', opened.scenarios_url);
    for (const sc of scenarios) {
      await ctl('POST', opened.report_url, await this.scenario(adapter, sc));
    }
    return ctl('POST', opened.done_url, {});
  }

  async outcome(adapter, fn) {
    const start = performance.now();
    let out;
    let attempts;
    try {
      const r = await fn();
      out = { status: r.status };
      attempts = r.attempts;
    } catch (e) {
      if (e instanceof NotConfigurable) throw e;
      out = { error: { kind: adapter.kind(e), message: `${e.name}: ${e.message}${e.cause ? ` (${e.cause.code || e.cause.message})` : ''}`.slice(0, 1024) } };
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
      const warm = async () => {
        for (let i = 0; i < Math.max(1, sc.warm_requests || 1); i++) await get(sc.warm_url || sc.url);
      };
      let r;
      switch (sc.steps) {
        case 'request':
          r = await this.outcome(adapter, () => req(sc.url));
          break;
        case 'warm-then-request':
          await warm();
          r = await this.outcome(adapter, () => req(sc.url));
          break;
        case 'warm-close-then-request':
          await warm();
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
