"""What aiohttp really does, measured against raw-socket servers (no
connaudit serve): the requests the server read, the connections it
accepted, and what the caller got, pinned. example_aiohttp.py's comments and
aiohttp.terms.json say what these show; connaudit serve's verdicts for
aiohttp (docs/serve.md's table) rest on them. Run with pytest
(kits/python/.venv)."""

import asyncio
import socket
import struct
import threading

import aiohttp
import pytest

from example_aiohttp import Aiohttp

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class RawServer:
    """A raw HTTP/1.1 server on loopback: each request read is handed to
    act(conn_no, req_no_on_conn, method, path), which answers it: "ok" (200,
    kept alive), "fin" (close), "rst" (reset), "hold" (answer nothing until
    the client closes, then set client_gone), "stall" (headers and 2 bytes
    of 10, then nothing until the client closes), "unread" (close as the
    request arrives, counted unread, not read). It counts connections and
    requests; every socket has a timeout, every loop ends."""

    def __init__(self, act):
        self.act, self.conns, self.requests, self.unread, self.methods = act, 0, 0, 0, []
        self.entered, self.client_gone = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.ln = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.ln.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ln.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                n = self.conns
            threading.Thread(target=self._conn, args=(c, n), daemon=True).start()

    def _conn(self, c, n):
        c.settimeout(10)
        buf, i = b"", 0
        try:
            for _ in range(100):
                while b"\r\n\r\n" not in buf:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                method, path = lines[0].split()[:2]
                length = next((int(h.split(":")[1]) for h in lines[1:] if h.lower().startswith("content-length:")), 0)
                while len(buf) < length:
                    buf += c.recv(65536)
                buf = buf[length:]
                i += 1
                what = self.act(n, i, method, path)
                with self.lock:
                    if what == "unread":
                        self.unread += 1
                    else:
                        self.requests += 1
                        self.methods.append(method)
                if what == "ok":
                    c.sendall(OK)
                    continue
                if what == "rst":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                if what in ("hold", "stall"):
                    if what == "stall":
                        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
                    self.entered.set()
                    while c.recv(65536):
                        pass
                    self.client_gone.set()
                return
        except OSError:
            return
        finally:
            c.close()

    def close(self):
        self.ln.close()


def policy(**p):
    base = {"attempt_timeout_ms": 0, "total_timeout_ms": 0, "max_retries": 0, "delay_ms": 0, "retry_statuses": [],
            "retry_errors": False, "retry_methods": ["GET", "HEAD"], "retry_with_idempotency_key": False,
            "retry_any_method": False, "connect_timeout_ms": 0, "read_timeout_ms": 0, "tls_timeout_ms": 0,
            "pool_max_per_host": 0, "pool_acquire_timeout_ms": 0}
    base.update(p)
    return {"name": "truth", "policy": base, "expect": {"attempts": 1}, "request": {"method": "GET", "headers": {}}}


def outcome(coro):
    """What the caller got: ("status", N) or ("error", class name, kind)."""
    a = Aiohttp()

    async def run():
        try:
            status, _ = await coro
            return "status", status
        except Exception as e:
            return "error", type(e).__name__, a.kind(e)
    return asyncio.run(run())


async def calls(sc, *reqs):
    """Sends reqs ((method, url), …) through one client configured by the
    example from sc; returns the last one's result."""
    a = Aiohttp()
    s = await a.open(sc)
    try:
        r = None
        for method, url in reqs:
            r = await a.send(s, sc, method, url, {}, '{"order":7}' if method == "POST" else "")
        return r
    finally:
        await a.close(s)


@pytest.fixture
def server(request):
    srv = RawServer(request.param)
    yield srv
    srv.close()


@pytest.mark.parametrize("server", [lambda n, i, m, p: "fin"], indirect=True)
def test_a_get_lost_on_a_fresh_connection_is_sent_again(server):
    # The fresh connection closed after the server read the GET: aiohttp
    # sends it once more, on a new connection, and gives the caller the
    # second loss.
    got = outcome(calls(policy(read_timeout_ms=5000), ("GET", server.url + "/x")))
    assert got == ("error", "ServerDisconnectedError", "connection")
    assert (server.requests, server.conns) == (2, 2)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "rst"], indirect=True)
def test_a_get_reset_on_a_fresh_connection_is_sent_again(server):
    got = outcome(calls(policy(read_timeout_ms=5000), ("GET", server.url + "/x")))
    assert got[0] == "error" and got[2] == "connection", got
    assert (server.requests, server.conns) == (2, 2)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "fin"], indirect=True)
def test_a_post_lost_is_not_sent_again(server):
    got = outcome(calls(policy(read_timeout_ms=5000), ("POST", server.url + "/x")))
    assert got == ("error", "ServerDisconnectedError", "connection")
    assert (server.requests, server.conns) == (1, 1)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "fin" if (n, i) == (1, 2) else "ok"], indirect=True)
def test_a_kept_alive_get_read_then_lost_is_sent_again_and_answered(server):
    # The warm-up's connection kept alive; the server reads the next GET and
    # closes: the caller gets the 200 of the GET sent again on a new
    # connection, the server read it twice.
    got = outcome(calls(policy(read_timeout_ms=5000), ("GET", server.url + "/warm"), ("GET", server.url + "/x")))
    assert got == ("status", 200)
    assert (server.requests, server.conns) == (3, 2)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "unread" if (n, i) == (1, 2) else "ok"], indirect=True)
def test_a_kept_alive_get_closed_unread_is_sent_again_and_answered(server):
    got = outcome(calls(policy(read_timeout_ms=5000), ("GET", server.url + "/warm"), ("GET", server.url + "/x")))
    assert got == ("status", 200)
    assert (server.requests, server.unread, server.conns) == (2, 1, 2)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "unread" if (n, i) == (1, 2) else "ok"], indirect=True)
def test_a_kept_alive_post_closed_unread_is_the_callers_loss(server):
    got = outcome(calls(policy(read_timeout_ms=5000), ("GET", server.url + "/warm"), ("POST", server.url + "/x")))
    assert got == ("error", "ServerDisconnectedError", "connection")
    assert (server.requests, server.unread, server.conns) == (1, 1, 1)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "stall"], indirect=True)
def test_sock_read_ends_a_stalled_body(server):
    got = outcome(calls(policy(read_timeout_ms=200), ("GET", server.url + "/x")))
    assert got == ("error", "SocketTimeoutError", "timeout")
    assert (server.requests, server.conns) == (1, 1)
    assert server.client_gone.wait(5)  # the connection was closed, not pooled


@pytest.mark.parametrize("server", [lambda n, i, m, p: "hold" if p == "/hold" else "ok"], indirect=True)
def test_a_second_caller_waits_for_the_pool_of_one_and_is_refused(server):
    # TCPConnector(limit_per_host=1) and ClientTimeout(connect=…): the
    # second caller waits for the held connection and gets
    # ConnectionTimeoutError, without a connection of its own.
    sc = policy(pool_max_per_host=1, pool_acquire_timeout_ms=300)
    a = Aiohttp()

    async def run():
        s = await a.open(sc)
        try:
            first = asyncio.ensure_future(a.send(s, sc, "GET", server.url + "/hold", {}, ""))
            await asyncio.to_thread(server.entered.wait, 5)
            try:
                await a.send(s, sc, "GET", server.url + "/x", {}, "")
                return "no error"
            except Exception as e:
                return type(e).__name__, a.kind(e)
            finally:
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
        finally:
            await a.close(s)
    assert asyncio.run(run()) == ("ConnectionTimeoutError", "pool")
    assert (server.requests, server.conns) == (1, 1)
    assert server.client_gone.wait(5)


@pytest.mark.parametrize("server", [lambda n, i, m, p: "hold"], indirect=True)
def test_a_cancelled_task_closes_its_connection(server):
    sc = policy(read_timeout_ms=5000)
    a = Aiohttp()

    async def run():
        s = await a.open(sc)
        try:
            call = asyncio.ensure_future(a.send(s, sc, "GET", server.url + "/x", {}, ""))
            await asyncio.to_thread(server.entered.wait, 5)
            call.cancel()
            r = await asyncio.gather(call, return_exceptions=True)
            return type(r[0]).__name__
        finally:
            await a.close(s)
    assert asyncio.run(run()) == "CancelledError"
    assert server.client_gone.wait(5)
    assert (server.requests, server.conns) == (1, 1)
