"""An example client audited by connaudit serve: httpx, configured from each
scenario's policy: httpx.Timeout(connect, read, write, pool),
httpx.Limits(max_connections), no retry layer (httpx retries no status, so
the contracts whose point is a retry are not configurable).

httpx keeps an idle connection for httpx.Limits' keepalive_expiry (5 s, its
default, set here explicitly): the pool closes an expired one at its next
request, and drops one the server has closed (httpcore reads it readable)
before it sends. httpx has no HTTP/2 health check (PING) to configure, and
this example speaks HTTP/1.1.

    connaudit serve -- python3 kits/python/example_httpx.py
"""

import os
import ssl
import sys

import httpx

from connaudit_kit import NotConfigurable, load_terms, main, seconds


class Httpx:
    name = "httpx"
    # What fixes each failure, in httpx's terms (client.terms).
    terms = load_terms("httpx")
    version = httpx.__version__
    config = "httpx.Client(timeout=httpx.Timeout(...), limits=httpx.Limits(...)), no retry layer"
    protocols = ["http1"]
    # httpx.Limits(keepalive_expiry=5.0), httpx's default.
    keepalive_expiry = 5.0
    idle_timeout_ms = keepalive_expiry * 1000

    def open(self, sc):
        p = sc["policy"]
        if sc["expect"]["attempts"] > 1:
            raise NotConfigurable("httpx retries no status, and this example adds no retry layer")
        connect = seconds(max(p["connect_timeout_ms"], p["tls_timeout_ms"]))
        read = seconds(p["read_timeout_ms"] or p["attempt_timeout_ms"])
        pool = seconds(p["pool_acquire_timeout_ms"])
        limits = httpx.Limits(max_connections=p["pool_max_per_host"] or None, keepalive_expiry=self.keepalive_expiry)
        # The CA as an SSL context: httpx deprecates a file name for verify.
        ca = os.environ.get("CONNAUDIT_CA")
        verify = ssl.create_default_context(cafile=ca) if ca else True
        c = httpx.Client(timeout=httpx.Timeout(connect=connect, read=read, write=read, pool=pool), limits=limits,
                         verify=verify, transport=httpx.HTTPTransport(retries=0, limits=limits, verify=verify))
        c.connaudit_config = (f"httpx.Timeout(connect={connect}, read={read}, pool={pool}), "
                              f"Limits(max_connections={limits.max_connections}, keepalive_expiry={limits.keepalive_expiry})")
        if p.get("send_ping_timeout_ms"):
            c.connaudit_config += "; httpx has no HTTP/2 PING health check"
        return c

    def send(self, c, sc, method, url, headers, body, read_bytes=None):
        try:
            with c.stream(method, url, headers=headers, content=body.encode() if body else None) as r:
                if read_bytes is not None:
                    for chunk in r.iter_raw(read_bytes):
                        break
                else:
                    for _ in r.iter_raw():
                        pass
                return r.status_code, 1
        except Exception as e:
            e.connaudit_attempts = 1  # no retry layer: one attempt, ended in this error
            raise

    def kind(self, e):
        if isinstance(e, httpx.PoolTimeout):
            return "pool"
        if isinstance(e, httpx.TimeoutException):
            return "timeout"
        if isinstance(e, (httpx.TransportError, httpx.RemoteProtocolError)):
            return "connection"
        return "other"

    def close(self, c):
        c.close()


if __name__ == "__main__":
    sys.exit(main(Httpx()))
