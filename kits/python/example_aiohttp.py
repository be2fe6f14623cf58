"""An example client audited by connaudit serve: aiohttp (asyncio), configured
from each scenario's policy as closely as aiohttp allows:

    ClientSession(connector=TCPConnector(limit, limit_per_host,
                  keepalive_timeout=15), timeout=ClientTimeout(total, connect,
                  sock_connect, sock_read))

- attempt_timeout_ms: ClientTimeout(total=…), which bounds the whole call,
  connect to the body's last byte (aiohttp keeps the timer on the response
  while its body is read);
- read_timeout_ms: sock_read, the longest wait for a read of the socket:
  the headers' and each read of the body's (a read interval);
- connect_timeout_ms and tls_timeout_ms: sock_connect, the larger of the
  two: one bound on a new connection's connect and TLS handshake;
- pool_max_per_host: TCPConnector(limit_per_host=N, limit=N), and
  pool_acquire_timeout_ms: ClientTimeout(connect=…), which bounds the wait
  for a connection, from the pool or new. A caller refused by it gets
  ConnectionTimeoutError, the error a slow connect gives: the example says
  "pool" for it only in a scenario with a pool bound and no connect bound.

aiohttp has no retry layer (aiohttp-retry is another package), so the
contracts whose point is a retry are not configurable. It does send some
requests again by itself: a GET, HEAD, OPTIONS, TRACE, PUT or DELETE whose
connection is lost before the response (ServerDisconnectedError,
ClientOSError) is sent once more on a new connection, fresh connection or
kept-alive, read by the server or not (ClientSession's private
_retry_connection; no setting turns it off). The example reports one
attempt, as the caller sees one: the server's count shows the replay
(test_truth_aiohttp.py measures it against raw sockets).

aiohttp keeps an idle connection for TCPConnector's keepalive_timeout (15 s,
its default, set here explicitly; idle_timeout_ms 15000) and speaks
HTTP/1.1 only: no HTTP/2 health check to configure.

    connaudit serve -- python3 kits/python/example_aiohttp.py
"""

import asyncio
import os
import ssl
import sys

import aiohttp

from connaudit_kit import NotConfigurable, load_terms, main, seconds


class Aiohttp:
    name = "aiohttp"
    # What fixes each failure, in aiohttp's terms (client.terms).
    terms = load_terms("aiohttp")
    version = aiohttp.__version__
    config = "aiohttp.ClientSession(connector=TCPConnector(...), timeout=ClientTimeout(...)), no retry layer"
    protocols = ["http1"]
    # TCPConnector(keepalive_timeout=15.0), aiohttp's default.
    keepalive_timeout = 15.0
    idle_timeout_ms = keepalive_timeout * 1000

    async def open(self, sc):
        p = sc["policy"]
        if sc["expect"]["attempts"] > 1:
            raise NotConfigurable("aiohttp retries no status, and this example adds no retry layer")
        total = seconds(p["attempt_timeout_ms"])
        sock_read = seconds(p["read_timeout_ms"])
        sock_connect = seconds(max(p["connect_timeout_ms"], p["tls_timeout_ms"]))
        acquire = seconds(p["pool_acquire_timeout_ms"])
        per_host = p["pool_max_per_host"] or 0
        ca = os.environ.get("CONNAUDIT_CA")
        ctx = ssl.create_default_context(cafile=ca) if ca else True
        connector = aiohttp.TCPConnector(limit=per_host or 100, limit_per_host=per_host,
                                         keepalive_timeout=self.keepalive_timeout, ssl=ctx)
        timeout = aiohttp.ClientTimeout(total=total, connect=acquire, sock_connect=sock_connect, sock_read=sock_read)
        s = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
        s.connaudit_pool_kind = bool(acquire) and not sock_connect
        s.connaudit_config = (f"ClientTimeout(total={total}, connect={acquire}, sock_connect={sock_connect}, "
                              f"sock_read={sock_read}), TCPConnector(limit={per_host or 100}, "
                              f"limit_per_host={per_host}, keepalive_timeout={self.keepalive_timeout})")
        if p.get("send_ping_timeout_ms"):
            s.connaudit_config += "; aiohttp has no HTTP/2, so no PING health check"
        return s

    async def send(self, s, sc, method, url, headers, body, read_bytes=None):
        try:
            async with s.request(method, url, headers=headers, data=body.encode() if body else None) as r:
                if read_bytes is not None:
                    await r.content.read(read_bytes)
                    r.close()  # the rest unread: the connection is dropped
                else:
                    async for _ in r.content.iter_chunked(64 << 10):
                        pass
                return r.status, 1
        except aiohttp.ConnectionTimeoutError as e:
            if s.connaudit_pool_kind:
                e.connaudit_kind = "pool"  # waited for a connection from a pool at its limit
            e.connaudit_attempts = 1
            raise
        except Exception as e:
            e.connaudit_attempts = 1  # no retry layer: one attempt, ended in this error
            raise

    def kind(self, e):
        if getattr(e, "connaudit_kind", None):
            return e.connaudit_kind
        if isinstance(e, (aiohttp.ServerTimeoutError, asyncio.TimeoutError, TimeoutError)):
            return "timeout"
        if isinstance(e, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)):
            return "connection"
        return "other"

    async def close(self, s):
        await s.close()


if __name__ == "__main__":
    sys.exit(main(Aiohttp()))
