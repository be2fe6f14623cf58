"""An example client audited by connaudit serve: requests with urllib3's
Retry, configured from each scenario's policy as a team would configure it:
timeout=(connect, read), HTTPAdapter(max_retries=Retry(total, status,
status_forcelist, allowed_methods, backoff_factor, connect=0, read=0,
raise_on_status=False)).

requests has no pool acquire timeout: HTTPAdapter.send calls urllib3's
urlopen without pool_timeout, so a blocking pool's second caller waits for
the connection with no bound (pool-acquire-timeout: not configurable).

urllib3 has no idle timeout: a pooled connection is kept until the server
closes it (idle_timeout_ms 0); when a connection is taken from the pool,
urllib3 drops it if the server's close has already arrived
(is_connection_dropped), and else sends on it. requests speaks HTTP/1.1
only: no HTTP/2 health check (send_ping_timeout_ms) to configure.

    connaudit serve -- python3 kits/python/example_requests.py

CONNAUDIT_EXAMPLE=retry-500 puts 500 in status_forcelist on contract A5, so
that the test of a broken configuration sees A5 fail.
"""

import os
import sys
import threading

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from connaudit_kit import NotConfigurable, load_terms, main, seconds


class CountedRetry(Retry):
    """urllib3 Retry that counts, in the calling thread, the retries it
    lets happen: a call that raises reports 1 + that count as its attempts
    (urllib3's MaxRetryError carries no history)."""

    counts = threading.local()

    def increment(self, *args, **kwargs):
        new = super().increment(*args, **kwargs)  # raises when no retry is left
        CountedRetry.counts.n = getattr(CountedRetry.counts, "n", 0) + 1
        return new


class Requests:
    name = "requests"
    # What fixes each failure, in requests' and urllib3's terms (client.terms).
    terms = load_terms("requests")
    version = f"{requests.__version__} (urllib3 {urllib3.__version__})"
    config = "requests.Session, HTTPAdapter(max_retries=urllib3 Retry(...)), timeout=(connect, read)"
    protocols = ["http1"]
    # urllib3 keeps an idle connection until the server closes it.
    idle_timeout_ms = 0

    def open(self, sc):
        p = sc["policy"]
        if sc["request"].get("key_per_attempt"):
            raise NotConfigurable("urllib3 Retry resends the same headers: no new key per attempt")
        if p["total_timeout_ms"] and sc["expect"]["attempts"] > 1 and sc["contract"] == "A8":
            raise NotConfigurable("urllib3 Retry has no total budget")
        if p["pool_acquire_timeout_ms"]:
            # HTTPAdapter.send calls urlopen without pool_timeout: a
            # blocking pool's second caller waits with no bound.
            raise NotConfigurable("requests passes no pool_timeout to urllib3: with HTTPAdapter(pool_maxsize=1, "
                                  "pool_block=True) a second caller waits for the connection with no bound; "
                                  "urllib3's own acquire timeout (urlopen's pool_timeout) is out of requests' reach")
        statuses = list(p["retry_statuses"])
        if os.environ.get("CONNAUDIT_EXAMPLE") == "retry-500" and sc["name"] == "retry/500":
            statuses.append(500)
        methods = list(p["retry_methods"])
        if p["retry_any_method"] or (p["retry_with_idempotency_key"] and "Idempotency-Key" in sc["request"]["headers"]):
            methods.append(sc["request"]["method"])
        retry = CountedRetry(total=p["max_retries"], status=p["max_retries"], connect=0, read=0, other=0,
                      status_forcelist=statuses, allowed_methods=methods or ["GET"],
                      backoff_factor=p["delay_ms"] / 2000, raise_on_status=False, respect_retry_after_header=False)
        s = requests.Session()
        pool = p["pool_max_per_host"] or 10
        adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=pool, pool_block=bool(p["pool_max_per_host"]))
        s.mount("http://", adapter)
        s.mount("https://", adapter)
        # verify goes with each request: a Session's verify gives way to
        # REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE when they are set.
        s.connaudit_verify = os.environ.get("CONNAUDIT_CA") or True
        # requests has no attempt limit: the read timeout (each wait for a
        # read) stands in for it where the policy has no read interval.
        connect = seconds(max(p["connect_timeout_ms"], p["tls_timeout_ms"]))
        read = seconds(p["read_timeout_ms"] or p["attempt_timeout_ms"])
        s.connaudit_timeout = (connect, read)
        s.connaudit_config = (f"timeout=({connect}, {read}), Retry(total={p['max_retries']}, "
                              f"status_forcelist={statuses}, allowed_methods={methods}, connect=0, read=0), "
                              f"pool_maxsize={pool}, pool_block={bool(p['pool_max_per_host'])}")
        if p.get("send_ping_timeout_ms"):
            s.connaudit_config += "; no HTTP/2, so no PING health check"
        return s

    def send(self, s, sc, method, url, headers, body, read_bytes=None):
        CountedRetry.counts.n = 0
        try:
            r = s.request(method, url, headers=headers, data=body.encode() if body else None,
                          timeout=s.connaudit_timeout, verify=s.connaudit_verify, stream=True)
            try:
                if read_bytes is not None:
                    r.raw.read(read_bytes)
                else:
                    for _ in r.iter_content(64 << 10):
                        pass
            finally:
                r.close()
        except Exception as e:
            # The attempts Retry let happen before the call gave up.
            e.connaudit_attempts = CountedRetry.counts.n + 1
            raise
        history = getattr(getattr(r.raw, "retries", None), "history", None)
        return r.status_code, (len(history) + 1 if history is not None else None)

    def kind(self, e):
        chain = []
        while e is not None and len(chain) < 10:
            chain.append(e)
            e = e.__cause__ or e.__context__ or (e.args[0] if e.args and isinstance(e.args[0], BaseException) else None)
        for x in chain:
            # urllib3's NewConnectionError (refused) is a ConnectTimeoutError.
            if isinstance(x, urllib3.exceptions.NewConnectionError):
                return "connection"
        for x in chain:
            if isinstance(x, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
                return "timeout"
        for x in chain:
            if isinstance(x, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
                              urllib3.exceptions.ProtocolError, ConnectionError)):
                return "connection"
        return "other"

    def close(self, s):
        s.close()


if __name__ == "__main__":
    sys.exit(main(Requests()))
