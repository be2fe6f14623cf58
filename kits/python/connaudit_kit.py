"""The Python kit of connaudit serve (docs/serve.md, connaudit.serve/v1).

A kit is thin: it speaks the protocol, configures the client under test from
each scenario's policy (through an adapter), runs the scenario's steps and
reports what the caller got. The server judges.

    report = Kit().run(MyAdapter())      # from a script or a pytest test

An adapter has: name, version, config (text), protocols (list), and

    open(scenario) -> client      a new client (its own pool) for the
                                  scenario's policy; raise NotConfigurable
    send(client, scenario, method, url, headers, body, read_bytes=None)
                                  -> (status, attempts or None); reads the
                                  body (read_bytes of it when given, then
                                  closes); raises the client's own errors
    kind(exc) -> "timeout" | "connection" | "pool" | "other"
    close(client)

Only the standard library is used for the control requests (a client of
the kit's own, never the one under test).
"""

import json
import os
import ssl
import threading
import time
import urllib.error
import urllib.request

PROTOCOL = "connaudit.serve/v1"


class NotConfigurable(Exception):
    """The client has no equivalent of a setting the scenario needs."""


class KitError(Exception):
    """The control API refused a request of the kit's."""


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

    def run(self, adapter, run="", skip=""):
        """Audits adapter's client on every scenario offered; returns the
        session's report (a dict, see docs/serve.md), whose "ok" says
        whether every verdict passed."""
        opened = self._ctl("POST", self.url + "/v1/sessions", {
            "protocol": PROTOCOL, "kit": "python",
            "client": {"name": adapter.name, "version": adapter.version, "config": adapter.config},
            "protocols": adapter.protocols,
            "run": run or os.environ.get("CONNAUDIT_RUN", ""), "skip": skip or os.environ.get("CONNAUDIT_SKIP", ""),
        })
        scenarios = self._ctl("GET", opened["scenarios_url"])["scenarios"]
        for sc in scenarios:
            self._ctl("POST", opened["report_url"], self._scenario(adapter, sc))
        return self._ctl("POST", opened["done_url"], {})

    def _outcome(self, adapter, fn):
        start = time.monotonic()
        attempts = None
        try:
            status, attempts = fn()
            out = {"status": status}
        except NotConfigurable:
            raise
        except Exception as e:  # the client's own error: the kind says which
            out = {"error": {"kind": adapter.kind(e), "message": f"{type(e).__name__}: {e}"[:1024]}}
        return out, (time.monotonic() - start) * 1000, attempts

    def _scenario(self, adapter, sc):
        name, steps, req = sc["name"], sc["steps"], sc["request"]
        try:
            client = adapter.open(sc)
        except NotConfigurable as e:
            return {"scenario": name, "not_configurable": str(e), "elapsed_ms": 0}
        try:
            send = lambda url, read_bytes=None, r=req: adapter.send(
                client, sc, r["method"], url, r["headers"], r["body"], read_bytes)
            get = lambda url: adapter.send(client, sc, "GET", url, {}, "", None)

            def warm():
                for _ in range(max(1, sc.get("warm_requests", 1))):
                    get(sc.get("warm_url") or sc["url"])
            if steps == "request":
                out, ms, attempts = self._outcome(adapter, lambda: send(sc["url"]))
            elif steps == "warm-then-request":
                warm()
                out, ms, attempts = self._outcome(adapter, lambda: send(sc["url"]))
            elif steps == "warm-close-then-request":
                warm()
                self._ctl("POST", sc["close_url"], {})
                out, ms, attempts = self._outcome(adapter, lambda: send(sc["url"]))
            elif steps == "read-then-close":
                out, ms, attempts = self._outcome(adapter, lambda: send(sc["url"], sc["read_bytes"]))
            elif steps == "second-caller":
                holder = threading.Thread(target=lambda: self._outcome(adapter, lambda: get(sc["hold_url"])))
                holder.start()
                self._ctl("GET", sc["entered_url"])
                out, ms, attempts = self._outcome(adapter, lambda: send(sc["url"]))
                holder.join(timeout=sc["guard_ms"] / 1000 + 5)
            elif steps == "cancel-when-entered":
                cancel = getattr(adapter, "cancel", None)
                if cancel is None:
                    raise NotConfigurable(f"{adapter.name} has no way to cancel a call in flight")
                out, ms, attempts = self._outcome(adapter, lambda: cancel(client, sc, lambda: self._ctl("GET", sc["entered_url"])))
            else:
                return {"scenario": name, "skipped": f"steps {steps} unknown to the Python kit", "elapsed_ms": 0}
            ok, ok_ms, _ = self._outcome(adapter, lambda: get(sc["ok_url"]))
            ok["elapsed_ms"] = ok_ms
            rep = {"scenario": name, "outcome": out, "elapsed_ms": ms, "ok": ok,
                   "config": getattr(client, "connaudit_config", "")}
            if attempts is not None:
                rep["attempts"] = attempts
            return rep
        except NotConfigurable as e:
            return {"scenario": name, "not_configurable": str(e), "elapsed_ms": 0}
        finally:
            adapter.close(client)


def seconds(ms):
    """A policy's milliseconds as seconds, None for 0 (not set)."""
    return ms / 1000 if ms else None


def main(adapter):
    """Runs the kit on adapter and prints a line; exit status 0 if ok."""
    report = Kit().run(adapter)
    print(f"connaudit kit: {adapter.name}: {report['passed']} passed, {report['failed']} failed, "
          f"{report['not_configurable']} not configurable")
    return 0 if report["ok"] else 1
