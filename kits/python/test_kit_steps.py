"""The kit's steps against a control API of the test's own (no connaudit
serve): what the kit reports, and in which order it calls the client and
the control API. Run with pytest (kits/python/.venv)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from connaudit_kit import Kit
from example_requests import Requests


class FakeServe:
    """A control API that offers the scenarios given, records every call
    (("ctl", path) and the adapter's ("send", method, url)) in order, and
    keeps the reports. entered_url answers once the test's entered event is
    set. A scenario's URLs on http://ctl are the control API's own."""

    def __init__(self, scenarios):
        self.scenarios, self.events, self.reports, self.opened = scenarios, [], [], None
        self.entered = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.handle_call()

            def do_POST(self):
                self.handle_call()

            def handle_call(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                path = self.path.split("?")[0]
                fake.events.append(("ctl", path))
                base = f"http://127.0.0.1:{fake.port}"
                out = {"protocol": "connaudit.serve/v1"}
                if path == "/v1/sessions":
                    fake.opened = body
                    out.update(session="s1", scenarios_url=base + "/scenarios", report_url=base + "/reports",
                               done_url=base + "/done")
                elif path == "/scenarios":
                    out["scenarios"] = json.loads(json.dumps(fake.scenarios).replace("http://ctl", base))
                elif path == "/reports":
                    fake.reports.append(body)
                elif path == "/done":
                    out.update(ok=True, passed=len(fake.reports), failed=0, not_configurable=0)
                elif path == "/entered":
                    fake.entered.wait(10)
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def scenario(name, steps, **extra):
    sc = {"name": name, "steps": steps, "url": "http://fault/x", "ok_url": "http://ok/x", "guard_ms": 8000,
          "request": {"method": "GET", "headers": {}, "body": ""}, "policy": {}, "expect": {"attempts": 1}}
    sc.update(extra)
    return sc


@pytest.fixture
def serve(request):
    fake = FakeServe(request.param)
    yield fake
    fake.close()


class Scripted:
    """A sync adapter whose send answers from a script: a URL's entry is
    a status, or an exception to raise."""

    name, version, config, protocols = "scripted", "1", "", ["http1"]
    idle_timeout_ms = 4000

    def __init__(self, fake, script):
        self.fake, self.script = fake, script

    def open(self, sc):
        return object()

    def send(self, client, sc, method, url, headers, body, read_bytes=None):
        self.fake.events.append(("send", method, url))
        r = self.script.get(url, 200)
        if isinstance(r, BaseException):
            raise r
        return r, 1

    def kind(self, e):
        return "connection"

    def close(self, client):
        pass


def lost(attempts):
    e = ConnectionError("the connection was lost")
    e.connaudit_attempts = attempts
    return e


@pytest.mark.parametrize("serve", [[scenario("a", "request")]], indirect=True)
def test_attempts_of_a_call_that_raises_are_reported(serve):
    Kit(url=serve.url).run(Scripted(serve, {"http://fault/x": lost(3)}))
    rep = serve.reports[0]
    assert rep["outcome"]["error"]["kind"] == "connection"
    assert rep["attempts"] == 3


@pytest.mark.parametrize("serve", [[scenario("a", "request")]], indirect=True)
def test_idle_timeout_is_declared_at_open(serve):
    Kit(url=serve.url).run(Scripted(serve, {}))
    assert serve.opened["client"]["idle_timeout_ms"] == 4000


@pytest.mark.parametrize("serve", [[scenario("a", "request")]], indirect=True)
def test_terms_are_declared_at_open(serve):
    a = Scripted(serve, {})
    a.terms = {"stale": "retry it yourself"}
    Kit(url=serve.url).run(a)
    assert serve.opened["client"]["terms"] == {"stale": "retry it yourself"}
    Kit(url=serve.url).run(Scripted(serve, {}))
    assert "terms" not in serve.opened["client"]


def test_the_examples_terms_are_theirs():
    assert Requests.terms["retry_statuses"] == "urllib3 Retry: status_forcelist=[503] only"


@pytest.mark.parametrize("serve", [[scenario("a", "warm-then-request", settle_url="http://ctl/settle",
                                             warm_url="http://warm/x", warm_requests=2)]], indirect=True)
def test_warm_ups_then_the_call_then_settle_then_ok(serve):
    Kit(url=serve.url).run(Scripted(serve, {}))
    steps = [e for e in serve.events if e[0] == "send" or e[1] == "/settle"]
    assert steps == [("send", "GET", "http://warm/x"), ("send", "GET", "http://warm/x"),
                     ("send", "GET", "http://fault/x"), ("ctl", "/settle"), ("send", "GET", "http://ok/x")]


@pytest.mark.parametrize("serve", [[scenario("a", "warm-close-then-request", close_url="http://ctl/close"),
                                    scenario("b", "request")]], indirect=True)
def test_a_warm_up_that_fails_is_the_outcome(serve):
    Kit(url=serve.url).run(Scripted(serve, {"http://fault/x": lost(1)}))
    a, b = serve.reports
    assert a["outcome"]["error"]["message"].startswith("warm-up 1 of 1: ")
    assert a["ok"] == {"status": 200, "elapsed_ms": a["ok"]["elapsed_ms"]}
    assert ("ctl", "/close") not in serve.events  # the scenario ended at its warm-up
    assert b["outcome"]["error"]["kind"] == "connection"  # the session went on


class AsyncHttpx:
    """An asyncio client's adapter: httpx.AsyncClient, with no cancel of its
    own (the kit cancels the call's task)."""

    name, version, config, protocols = "httpx-async", httpx.__version__, "", ["http1"]

    def __init__(self, fake):
        self.fake = fake

    async def open(self, sc):
        return httpx.AsyncClient(timeout=5)

    async def send(self, c, sc, method, url, headers, body, read_bytes=None):
        self.fake.events.append(("send", method, url))
        r = await c.request(method, url, headers=headers)
        return r.status_code, 1

    def kind(self, e):
        return "connection" if isinstance(e, httpx.TransportError) else "other"

    async def close(self, c):
        await c.aclose()


def http_server(entered):
    """A raw HTTP/1.1 server: every request answered 200 "ok" on a kept-alive
    connection, but one for /hang, which it never answers: it sets entered
    instead, and holds the connection until the client closes it."""
    ln = socket.create_server(("127.0.0.1", 0))

    def conn(c):
        with c:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                if head.split()[1] == b"/hang":
                    entered.set()
                    while c.recv(65536):
                        pass
                    return
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def serve():
        while True:
            try:
                c, _ = ln.accept()
            except OSError:
                return
            threading.Thread(target=conn, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return ln


@pytest.mark.parametrize("serve", [[]], indirect=True)
def test_an_async_adapter_runs_and_its_call_is_cancelled_by_its_task(serve):
    ln = http_server(serve.entered)
    base = f"http://127.0.0.1:{ln.getsockname()[1]}"
    try:
        serve.scenarios.extend([
            scenario("warm", "warm-then-request", url=base + "/x", ok_url=base + "/ok"),
            scenario("cancel", "cancel-when-entered", url=base + "/hang", ok_url=base + "/ok",
                     entered_url=serve.url + "/entered"),
        ])
        Kit(url=serve.url).run(AsyncHttpx(serve))
    finally:
        ln.close()
    warm, cancel = serve.reports
    assert warm["outcome"] == {"status": 200} and warm["ok"]["status"] == 200
    assert [e for e in serve.events if e[0] == "send"][:3] == [
        ("send", "GET", base + "/x"), ("send", "GET", base + "/x"), ("send", "GET", base + "/ok")]
    assert cancel["outcome"]["error"]["kind"] == "canceled"
    assert cancel["ok"]["status"] == 200


def closing_server(first_status):
    """A raw server: the first request answered first_status, every later
    one's connection closed unanswered; seen counts the requests."""
    ln = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        while True:
            try:
                c, _ = ln.accept()
            except OSError:
                break
            c.recv(65536)
            seen.append(1)
            if len(seen) == 1:
                c.sendall(f"HTTP/1.1 {first_status} X\r\nContent-Length: 0\r\n\r\n".encode())
                if c.recv(65536):  # the retry, on the kept-alive connection
                    seen.append(1)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return ln, seen


def test_requests_reports_its_retries_when_the_call_raises():
    # Retry(total=2, status_forcelist=[503], read=0): the 503 is retried
    # (attempt 2), then the lost connection ends the call: 2 attempts.
    ln, seen = closing_server(503)
    url = f"http://127.0.0.1:{ln.getsockname()[1]}/x"
    a = Requests()
    sc = scenario("retry", "request", contract="A2", url=url,
                  policy={"max_retries": 2, "retry_statuses": [503], "retry_methods": ["GET", "HEAD"],
                          "retry_any_method": False, "retry_with_idempotency_key": False, "delay_ms": 0,
                          "total_timeout_ms": 0, "connect_timeout_ms": 0, "tls_timeout_ms": 0,
                          "read_timeout_ms": 2000, "attempt_timeout_ms": 0, "pool_max_per_host": 0,
                          "pool_acquire_timeout_ms": 0})
    s = a.open(sc)
    try:
        with pytest.raises(Exception) as e:
            a.send(s, sc, "GET", url, {}, "")
    finally:
        a.close(s)
        ln.close()
    assert e.value.connaudit_attempts == 2
    assert len(seen) == 2
    assert a.kind(e.value) == "connection"
