"""The Python kit of connaudit serve (docs/serve.md, connaudit.serve/v1).

A kit is thin: it speaks the protocol, configures the client under test from
each scenario's policy (through an adapter), runs the scenario's steps and
reports what the caller got. The server judges.

    report = Kit().run(MyAdapter())      # from a script or a pytest test

An adapter has: name, version, config (text), protocols (list),
idle_timeout_ms (optional: how long the client keeps an idle connection
before it closes it itself, as configured; 0 when it never does, None or
absent when unknown), terms (optional: a dict saying what fixes each
failure in the client's own terms, sent as client.terms, docs/serve.md;
load_terms(name) reads kits/python/NAME.terms.json), and

    open(scenario) -> client      a new client (its own pool) for the
                                  scenario's policy; raise NotConfigurable
    send(client, scenario, method, url, headers, body, read_bytes=None)
                                  -> (status, attempts or None); reads the
                                  body (read_bytes of it when given, then
                                  closes); raises the client's own errors.
                                  An error may carry the attempts its call
                                  made (its retry layer's count) in its
                                  attribute connaudit_attempts: a call that
                                  ends in an error reports them too.
    kind(exc) -> "timeout" | "connection" | "canceled" | "pool" | "other"
                                  "canceled": the call was cancelled by the
                                  kit (cancel-when-entered), whatever the
                                  client raises for it
    close(client)

and, optionally,

    cancel(client, scenario, entered) -> (status, attempts or None)
                                  for the steps cancel-when-entered: starts
                                  the scenario's request through the client,
                                  calls entered(), which returns once the
                                  server's handler has been entered, then
                                  cancels the call in flight however the
                                  client cancels one (closing its response,
                                  its connection, its session) and returns or
                                  raises what the caller got; kind() must
                                  class what it raises "canceled". Without
                                  it a sync adapter's scenario is not
                                  configurable.

An asyncio client (aiohttp-style): open, send, close and cancel may be
coroutine functions (async def). The kit then runs each scenario in an event
loop of its own (asyncio.run), awaits the adapter's calls in it, sends its
control requests from a worker thread so that the client's tasks go on
meanwhile, and runs a second caller as a task. Without cancel it cancels a
call in flight by cancelling its task: the caller gets
asyncio.CancelledError, reported as kind "canceled". With cancel, entered
is a coroutine function.

A warm-up that fails ends the scenario: its error is reported as the
outcome (the message says which warm-up), then /ok is sent as always.

Only the standard library is used for the control requests (a client of
the kit's own, never the one under test).
"""

import asyncio
import gc
import inspect
import json
import os
import time
import urllib.error
import urllib.request

PROTOCOL = "connaudit.serve/v1"


def load_terms(name):
    """The terms declaration of the client name beside this file,
    NAME.terms.json (docs/serve.md: client.terms)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".terms.json"), encoding="utf-8") as f:
        return json.load(f)


class NotConfigurable(Exception):
    """The client has no equivalent of a setting the scenario needs."""


class KitError(Exception):
    """The control API refused a request of the kit's."""


def is_async(adapter):
    """Whether adapter is an asyncio client's (its send is a coroutine
    function)."""
    return inspect.iscoroutinefunction(adapter.send)


async def _call(fn, *args):
    """Calls fn, awaiting what it returns when it is awaitable."""
    r = fn(*args)
    if inspect.isawaitable(r):
        r = await r
    return r


class Kit:
    def __init__(self, url=None, ca=None):
        self.url = url or os.environ.get("CONNAUDIT_URL")
        self.ca = ca or os.environ.get("CONNAUDIT_CA")
        if not self.url:
            raise KitError("CONNAUDIT_URL is not set: run under connaudit serve -- CMD")

    def _ctl(self, method, url, body=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise KitError(f"{method} {url}: {e.code} {e.read().decode(errors='replace')}") from None

    async def _actl(self, method, url, body=None):
        """A control request from a worker thread: the loop, and the
        client's tasks on it, go on meanwhile."""
        return await asyncio.to_thread(self._ctl, method, url, body)

    def run(self, adapter, run="", skip=""):
        """Audits adapter's client on every scenario offered; returns the
        session's report (a dict, see docs/serve.md), whose "ok" says
        whether every verdict passed."""
        client = {"name": adapter.name, "version": adapter.version, "config": adapter.config}
        idle = getattr(adapter, "idle_timeout_ms", None)
        if idle is not None:
            client["idle_timeout_ms"] = idle
        terms = getattr(adapter, "terms", None)
        if terms:
            client["terms"] = terms
        opened = self._ctl("POST", self.url + "/v1/sessions", {
            "protocol": PROTOCOL, "kit": "python", "client": client,
            "protocols": adapter.protocols,
            "run": run or os.environ.get("CONNAUDIT_RUN", ""), "skip": skip or os.environ.get("CONNAUDIT_SKIP", ""),
        })
        scenarios = self._ctl("GET", opened["scenarios_url"])["scenarios"]
        for sc in scenarios:
            self._ctl("POST", opened["report_url"], asyncio.run(self._scenario(adapter, sc)))
        # What the closed clients hold only as garbage (a failed call's
        # traceback keeps http.client's response, and its socket, until the
        # cyclic collector runs) is freed first: what done counts is then
        # what the client holds, the same on every run.
        gc.collect()
        return self._ctl("POST", opened["done_url"], {})

    async def _outcome(self, adapter, fn):
        """Runs the call fn and says what the caller got: (outcome, elapsed
        ms, attempts or None)."""
        start = time.monotonic()
        attempts = None
        try:
            status, attempts = await fn()
            out = {"status": status}
        except NotConfigurable:
            raise
        except asyncio.CancelledError as e:  # the kit cancelled an asyncio call's task
            out = {"error": {"kind": "canceled", "message": f"{type(e).__name__}: the kit cancelled the call's task"}}
        except Exception as e:  # the client's own error: the kind says which
            out = {"error": {"kind": adapter.kind(e), "message": f"{type(e).__name__}: {e}"[:1024]}}
            attempts = getattr(e, "connaudit_attempts", None)
        return out, (time.monotonic() - start) * 1000, attempts

    async def _scenario(self, adapter, sc):
        name, steps, req = sc["name"], sc["steps"], sc["request"]
        try:
            client = await _call(adapter.open, sc)
        except NotConfigurable as e:
            return {"scenario": name, "not_configurable": str(e), "elapsed_ms": 0}
        try:
            def send(url, read_bytes=None, r=req):
                return _call(adapter.send, client, sc, r["method"], url, r["headers"], r["body"], read_bytes)

            def get(url):
                return _call(adapter.send, client, sc, "GET", url, {}, "", None)

            failed = None
            if steps in ("warm-then-request", "warm-close-then-request"):
                n = max(1, sc.get("warm_requests") or 1)
                for i in range(n):
                    out, ms, attempts = await self._outcome(adapter, lambda: get(sc.get("warm_url") or sc["url"]))
                    if "error" in out:
                        out["error"]["message"] = f"warm-up {i + 1} of {n}: " + out["error"]["message"]
                        failed = out, ms, attempts
                        break
            if failed:
                out, ms, attempts = failed
            elif steps in ("request", "warm-then-request"):
                out, ms, attempts = await self._outcome(adapter, lambda: send(sc["url"]))
            elif steps == "warm-close-then-request":
                await self._actl("POST", sc["close_url"], {})
                out, ms, attempts = await self._outcome(adapter, lambda: send(sc["url"]))
            elif steps == "read-then-close":
                out, ms, attempts = await self._outcome(adapter, lambda: send(sc["url"], sc["read_bytes"]))
            elif steps == "second-caller":
                if is_async(adapter):
                    holder = asyncio.ensure_future(self._outcome(adapter, lambda: get(sc["hold_url"])))
                else:  # a sync client's first caller holds a thread of its own
                    holder = asyncio.ensure_future(asyncio.to_thread(
                        lambda: asyncio.run(self._outcome(adapter, lambda: get(sc["hold_url"])))))
                await self._actl("GET", sc["entered_url"])
                out, ms, attempts = await self._outcome(adapter, lambda: send(sc["url"]))
                await asyncio.wait([holder], timeout=sc["guard_ms"] / 1000 + 5)
            elif steps == "cancel-when-entered":
                out, ms, attempts = await self._cancel(adapter, client, sc, send)
            else:
                return {"scenario": name, "skipped": f"steps {steps} unknown to the Python kit", "elapsed_ms": 0}
            if sc.get("settle_url"):
                await self._actl("POST", sc["settle_url"], {})
            ok, ok_ms, _ = await self._outcome(adapter, lambda: get(sc["ok_url"]))
            ok["elapsed_ms"] = ok_ms
            rep = {"scenario": name, "outcome": out, "elapsed_ms": ms, "ok": ok,
                   "config": getattr(client, "connaudit_config", "")}
            if attempts is not None:
                rep["attempts"] = attempts
            return rep
        except NotConfigurable as e:
            return {"scenario": name, "not_configurable": str(e), "elapsed_ms": 0}
        finally:
            await _call(adapter.close, client)

    async def _cancel(self, adapter, client, sc, send):
        """cancel-when-entered: the adapter's cancel, or, for an asyncio
        client without one, the call's task cancelled."""
        cancel = getattr(adapter, "cancel", None)
        if cancel is not None and inspect.iscoroutinefunction(cancel):
            return await self._outcome(adapter, lambda: cancel(client, sc, lambda: self._actl("GET", sc["entered_url"])))
        if cancel is not None:
            return await self._outcome(adapter, lambda: _call(cancel, client, sc, lambda: self._ctl("GET", sc["entered_url"])))
        if not is_async(adapter):
            raise NotConfigurable(f"{adapter.name} has no way to cancel a call in flight")
        task = asyncio.ensure_future(send(sc["url"]))
        call = asyncio.ensure_future(self._outcome(adapter, lambda: task))
        await self._actl("GET", sc["entered_url"])
        task.cancel()
        return await call


def seconds(ms):
    """A policy's milliseconds as seconds, None for 0 (not set)."""
    return ms / 1000 if ms else None


def main(adapter):
    """Runs the kit on adapter and prints a line; exit status 0 if ok."""
    report = Kit().run(adapter)
    print(f"connaudit kit: {adapter.name}: {report['passed']} passed, {report['failed']} failed, "
          f"{report['not_configurable']} not configurable")
    return 0 if report["ok"] else 1
