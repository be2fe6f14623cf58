"""The Python kit from pytest: each example client audited by the connaudit
serve that runs this test (connaudit serve -- python -m pytest kits/python).
Each test asserts that the session was run to its end — every scenario
reported, no error — and prints the verdicts; the verdicts themselves are
connaudit's to print and to turn into its exit status."""

import os

import pytest

from connaudit_kit import Kit
from example_aiohttp import Aiohttp
from example_httpx import Httpx
from example_requests import Requests

pytestmark = pytest.mark.skipif(not os.environ.get("CONNAUDIT_URL"), reason="run under connaudit serve -- pytest")


@pytest.mark.parametrize("adapter", [Requests(), Httpx(), Aiohttp()], ids=["requests", "httpx", "aiohttp"])
def test_example(adapter):
    report = Kit().run(adapter)
    assert report["not_reported"] == 0 and not report.get("error"), report
    assert len(report["results"]) > 0
    for r in report["results"]:
        print(r["name"], "PASS" if r["pass"] else r.get("not_configurable") and "N/A" or "FAIL", r.get("mismatches", ""))
