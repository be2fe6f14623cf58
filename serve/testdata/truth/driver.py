"""Drives one real Python client against the truth server: python driver.py
CLIENT CASE URL [URL2]; prints one line per call: "status N" or "error
KIND: message" (KIND: the exception's class name).

CASE "calls" runs the calls of $TRUTH_CALLS (space-separated: GET, POST, a
POST of {"order":7}, POSTK, the same with Idempotency-Key: order-7, GATE, a
GET of $TRUTH_GATE through urllib, not the client, WAIT, the same with
?wait=6s) with a read bound of
$TRUTH_BOUND_MS, through the client configured as kits/python's example
configures it for a scenario with no retries."""
import os
import sys
import urllib.request

client, case, url = sys.argv[1], sys.argv[2], sys.argv[3]
url2 = sys.argv[4] if len(sys.argv) > 4 else url
post = case.startswith("post")
# The bound: 200 ms where the fault stalls, 5 s elsewhere (a loaded
# machine's slow first call must not look like a timeout).
bound = 0.2 if case.startswith("stall") else 5.0
retry = case in ("503-503-200", "post-503", "500-retry", "stall-retry")


def call(do):
    try:
        print("status", do(), flush=True)
    except Exception as e:
        print("error", type(e).__name__ + ":", str(e).replace("\n", " ")[:200], flush=True)


if case == "calls":
    calls = os.environ["TRUTH_CALLS"].split()
    bound = int(os.environ["TRUTH_BOUND_MS"]) / 1000
    headers = {"POST": {"Content-Type": "application/json"},
               "POSTK": {"Content-Type": "application/json", "Idempotency-Key": "order-7"}}
    if client == "requests":
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        # example_requests.py's configuration for a policy of no retries.
        s = requests.Session()
        a = HTTPAdapter(max_retries=Retry(total=0, status=0, connect=0, read=0, other=0, status_forcelist=[],
                                          allowed_methods=["GET"], backoff_factor=0, raise_on_status=False,
                                          respect_retry_after_header=False),
                        pool_connections=1, pool_maxsize=10, pool_block=False)
        s.mount("http://", a)

        def do(method, h):
            r = s.request(method, url, headers=h, data=b'{"order":7}' if method == "POST" else None,
                          timeout=(None, bound), stream=True)
            try:
                for _ in r.iter_content(64 << 10):
                    pass
            finally:
                r.close()
            return r.status_code
    elif client == "httpx":
        import httpx

        # example_httpx.py's configuration.
        limits = httpx.Limits(max_connections=None)
        s = httpx.Client(timeout=httpx.Timeout(connect=None, read=bound, write=bound, pool=None), limits=limits,
                         transport=httpx.HTTPTransport(retries=0, limits=limits))

        def do(method, h):
            with s.stream(method, url, headers=h, content=b'{"order":7}' if method == "POST" else None) as r:
                for _ in r.iter_raw():
                    pass
                return r.status_code
    else:
        sys.exit("unknown client " + client)
    for c in calls:
        if c in ("GATE", "WAIT"):
            gate = os.environ["TRUTH_GATE"] + ("?wait=6s" if c == "WAIT" else "")
            urllib.request.urlopen(gate, timeout=15).read()
            continue
        call(lambda: do("GET" if c == "GET" else "POST", headers.get(c, {})))
    s.close()
    sys.exit(0)

if client == "requests":
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    s = requests.Session()
    if retry:
        # urllib3 Retry as a team sets it: 503 only, its default methods.
        a = HTTPAdapter(max_retries=Retry(total=2, status_forcelist=[503], backoff_factor=0, raise_on_status=False))
        s.mount("http://", a)

    def do(u):
        r = s.request("POST" if post else "GET", u, data=b'{"order":7}' if post else None, timeout=bound)
        r.content
        return r.status_code
elif client == "httpx":
    import httpx

    s = httpx.Client(timeout=bound)

    def do(u):
        r = s.request("POST" if post else "GET", u, content=b'{"order":7}' if post else None)
        r.read()
        return r.status_code
else:
    sys.exit("unknown client " + client)

if case == "keepalive-disconnect":
    call(lambda: do(url))
call(lambda: do(url2))
s.close()
