"""Drives one real Python client against the truth server: python driver.py
CLIENT CASE URL [URL2]; prints one line per call: "status N" or "error
KIND: message" (KIND: the exception's class name)."""
import sys

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
