// check.mjs: parses a trace written by `connaudit probe -trace-events` with
// Chrome DevTools' own trace engine (@paulirish/trace_engine, the parser of
// the Performance panel) and checks what it finds against the probe's JSON
// report:
//
//   node check.mjs TRACE.json REPORT.json
//
// It prints each track (thread) the engine made, with its slices, then the
// engine's warnings, and exits 1 when the engine fails to parse the file or
// when the counts differ from the report's:
//   - the tracks name exactly the report's connections ("#ID", and "#ID ·2"
//     for the next track of a connection whose attempts overlap);
//   - each track's slices nest under its request slices (a request slice
//     is a root of the track's tree, every stage slice below one);
//   - the request slices of a connection's tracks are its requests, and in
//     all the report's requests and extra attempts;
//   - the engine keeps every complete event ("ph":"X") of the file.
// A trace that is no JSON, or has no traceEvents, exits 1 too; exit
// status 2 is a usage error or a report that cannot be read.
import fs from 'node:fs';
import process from 'node:process';
import * as Trace from '@paulirish/trace_engine';
import {polyfillDOMRect} from '@paulirish/trace_engine/analyze-trace.mjs';

function usage(msg) {
  console.error(`check: ${msg}\nusage: node check.mjs TRACE.json REPORT.json`);
  process.exit(2);
}

// readJSON reads path's JSON; what cannot be read or parsed exits with
// status code.
function readJSON(path, code) {
  try {
    return JSON.parse(fs.readFileSync(path, 'utf8'));
  } catch (err) {
    console.error(`check: ${path}: ${err.message}`);
    process.exit(code);
  }
}

if (process.argv.length !== 4) {
  usage('two files needed');
}
const [tracePath, reportPath] = process.argv.slice(2);
const file = readJSON(tracePath, 1);
const report = readJSON(reportPath, 2);
const events = file.traceEvents;
if (!Array.isArray(events)) {
  console.error(`check: ${tracePath}: no traceEvents array`);
  process.exit(1);
}
if (typeof report.requests !== 'number' || !Array.isArray(report.connections)) {
  usage(`${reportPath}: not a probe's JSON report (no requests or connections)`);
}

// What the file holds, counted without the engine.
let fileSlices = 0;
for (const e of events) {
  if (e.ph === 'X') {
    fileSlices++;
  }
}

// The engine prints what it finds wrong to the console as well as into
// its Warnings handler: keep both.
const logged = [];
for (const level of ['warn', 'error']) {
  const orig = console[level];
  console[level] = (...args) => {
    logged.push(`${level}: ${args.map(String).join(' ')}`);
  };
  console[level].orig = orig;
}
function restoreConsole() {
  for (const level of ['warn', 'error']) {
    if (console[level].orig) {
      console[level] = console[level].orig;
    }
  }
}

polyfillDOMRect();
const started = process.hrtime.bigint();
let parsed;
try {
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(events);
  parsed = model.parsedTrace();
  if (!parsed) {
    throw new Error('no parsed trace');
  }
} catch (err) {
  restoreConsole();
  console.error(`check: the trace engine could not parse ${tracePath}: ${err.stack ?? err}`);
  for (const l of logged) {
    console.error(`  ${l}`);
  }
  process.exit(1);
}
restoreConsole();
const parseMs = Number(process.hrtime.bigint() - started) / 1e6;

const problems = [];
const tracks = [];
const byConn = new Map(); // connection id -> {tracks, requests}
let slices = 0;
let requestSlices = 0;
for (const [pid, proc] of parsed.data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    const name = thread.name ?? '';
    const m = /^#(\d+)(?: ·(\d+))?$/.exec(name);
    if (!m) {
      problems.push(`track ${pid}/${tid} "${name}" names no connection`);
      continue;
    }
    const conn = Number(m[1]);
    let n = 0;
    let reqs = 0;
    for (const e of thread.entries) {
      if (e.ph !== 'X') {
        continue;
      }
      n++;
      if (e.cat === 'request') {
        reqs++;
        if (e.args?.conn !== conn) {
          problems.push(`track "${name}": request ${e.args?.request} of connection ${e.args?.conn}`);
        }
      }
    }
    let roots = 0;
    for (const node of thread.tree?.roots ?? []) {
      roots++;
      if (node.entry.cat !== 'request') {
        problems.push(`track "${name}": a ${node.entry.cat} slice "${node.entry.name}" outside any request`);
      }
    }
    if (roots !== reqs) {
      problems.push(`track "${name}": ${roots} root slices, ${reqs} request slices`);
    }
    tracks.push({pid, tid, name, slices: n, requests: reqs});
    const c = byConn.get(conn) ?? {tracks: 0, requests: 0};
    c.tracks++;
    c.requests += reqs;
    byConn.set(conn, c);
    slices += n;
    requestSlices += reqs;
  }
}

const v = JSON.parse(fs.readFileSync(new URL('./node_modules/@paulirish/trace_engine/package.json', import.meta.url)));
console.log(`trace engine: @paulirish/trace_engine ${v.version}, node ${process.version}`);
console.log(`file: ${tracePath}, ${fs.statSync(tracePath).size} bytes, ${events.length} events, ` +
    `${fileSlices} complete (X); parsed in ${(parseMs / 1000).toFixed(2)} s`);
console.log(`generic trace: ${parsed.data.Meta.traceIsGeneric}`);
console.log('tracks:');
for (const t of tracks) {
  console.log(`  ${t.pid}/${t.tid} ${t.name}: ${t.slices} slices, ${t.requests} requests`);
}
console.log(`${tracks.length} tracks of ${byConn.size} connections, ${slices} slices, ${requestSlices} request slices`);

const warnings = [];
for (const [warning, list] of parsed.data.Warnings.perWarning) {
  warnings.push(`${warning}: ${list.length} events`);
}
console.log(`engine warnings: ${warnings.length}${warnings.map(w => `\n  ${w}`).join('')}`);
console.log(`engine console output: ${logged.length}${logged.slice(0, 20).map(l => `\n  ${l}`).join('')}`);

// Against the file and the report.
const attempts = report.requests + (report.extra_attempts ?? 0);
console.log(`report: ${report.requests} requests, ${report.extra_attempts ?? 0} extra attempts, ` +
    `${report.connections.length} connections (${report.connections_omitted ?? 0} omitted), ${report.dials} dials`);
if (slices !== fileSlices) {
  problems.push(`the engine kept ${slices} slices of the file's ${fileSlices}`);
}
if (requestSlices !== attempts) {
  problems.push(`${requestSlices} request slices, the report's requests and extra attempts are ${attempts}`);
}
if (!report.connections_omitted) {
  const want = new Map(report.connections.map(c => [c.id, c]));
  for (const [id, c] of want) {
    const got = byConn.get(id);
    if (!got) {
      problems.push(`connection #${id} of the report has no track`);
    } else if (got.requests !== c.requests) {
      problems.push(`connection #${id}: ${got.requests} request slices, the report says ${c.requests} requests`);
    }
  }
  for (const id of byConn.keys()) {
    if (!want.has(id)) {
      problems.push(`track of connection #${id}, which the report does not list`);
    }
  }
} else if (byConn.size !== report.dials) {
  problems.push(`${byConn.size} connections have tracks, the report counts ${report.dials} dials`);
}

if (problems.length > 0) {
  console.log(`FAIL: ${problems.length} problems`);
  for (const p of problems.slice(0, 50)) {
    console.log(`  ${p}`);
  }
  process.exit(1);
}
console.log('ok: every connection of the report has its tracks, every request its slice');
