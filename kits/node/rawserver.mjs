// A raw HTTP/1.1 server on loopback for the truth tests: each request read
// is handed to act(conn, reqOnConn, method, path), which says what the
// server does with it:
//   "ok"            200 "ok", kept alive
//   "big"           200 with a body of 1 MiB, kept alive
//   "503"           503 "no", kept alive
//   "ka:N"          200 "ok" with Keep-Alive: timeout=N, kept alive
//   "fin", "rst"    the request read, then closed (FIN) or reset (RST)
//   "unread-fin", "unread-rst"  the same, the request counted unread: the
//                   server closes as it arrives (it reads only to know it came)
//   "stall"         nothing more, until the client closes (clientGone)
//   "ok-fin", "ok-rst"  200 "ok", then the connection closed (FIN) or
//                   reset as soon as it is idle, before the next request
// It counts connections, requests read (by method) and unread; every wait
// ends with the client's close or the server's.
import net from 'node:net';
import { once } from 'node:events';

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

export class RawServer {
  constructor(act) {
    this.act = act;
    this.conns = 0;
    this.requests = 0;
    this.unread = 0;
    this.methods = [];
    this.sockets = new Set();
    this.byConn = new Map(); // connection number -> socket, while open
    this.closed = 0; // connections ended, by either side
    this.waiters = [];
    this.server = net.createServer((s) => this.conn(s));
  }

  async listen() {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  // closedAtLeast resolves once n connections have closed.
  closedAtLeast(n) {
    if (this.closed >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  conn(s) {
    const n = ++this.conns;
    let i = 0;
    let buf = Buffer.alloc(0);
    let done = false;
    this.sockets.add(s);
    this.byConn.set(n, s);
    s.on('error', () => {});
    s.on('close', () => {
      this.sockets.delete(s);
      this.byConn.delete(n);
      this.closed++;
      this.waiters = this.waiters.filter((w) => (this.closed >= w.n ? (w.resolve(), false) : true));
    });
    s.on('data', (d) => {
      if (done) return;
      buf = Buffer.concat([buf, d]);
      for (let guard = 0; guard < 100; guard++) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        const length = m ? Number(m[1]) : 0;
        if (buf.length < end + 4 + length) return;
        buf = buf.subarray(end + 4 + length);
        const [method, path] = head.split(' ');
        const what = this.act(n, ++i, method, path);
        if (what.startsWith('unread')) {
          this.unread++;
        } else {
          this.requests++;
          this.methods.push(method);
        }
        switch (what) {
          case 'ok': s.write(OK); break;
          case 'big': s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${1 << 20}\r\n\r\n`); s.write(Buffer.alloc(1 << 20, 'x')); break;
          case '503': s.write('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\nno'); break;
          case 'ok-fin': s.end(OK); done = true; return;
          case 'ok-rst': s.write(OK, () => s.resetAndDestroy()); done = true; return;
          case 'fin': case 'unread-fin': s.end(); done = true; return;
          case 'rst': case 'unread-rst': s.resetAndDestroy(); done = true; return;
          case 'stall': done = true; return;
          default:
            if (what.startsWith('ka:')) {
              s.write(`HTTP/1.1 200 OK\r\nKeep-Alive: timeout=${what.slice(3)}\r\nContent-Length: 2\r\n\r\nok`);
              break;
            }
            throw new Error(`RawServer: unknown action ${what}`);
        }
      }
    });
  }

  // closeIdle closes connection n, idle between two requests: "fin" or
  // "rst". It returns at once: the client may not have seen it yet.
  closeIdle(n, how) {
    const s = this.byConn.get(n);
    if (!s) throw new Error(`RawServer: connection ${n} is not open`);
    if (how === 'rst') s.resetAndDestroy();
    else s.end();
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    this.server.close();
    await once(this.server, 'close');
  }
}
