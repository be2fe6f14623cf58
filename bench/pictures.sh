#!/usr/bin/env bash
# pictures.sh: how long a probe's page of 5,000 connections takes to load
# in headless Chromium, and the page's and the trace's size. Not a test:
# a number to read, against nginx on loopback.
#
#   bench/pictures.sh [CONNS]    (default 5000)
#
# Each request asks for its connection's close (-H "Connection: close"),
# so that CONNS requests make CONNS connections. Needs nginx, curl and
# chromium (.ci/services installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-5000}
source "$root/bench/nginx.sh"
nginx_bench "$root"
"$tmp/connaudit" probe -s -n "$n" -c 4 -H "Connection: close" -fail-on none \
	-html "$tmp/p.html" -trace-events "$tmp/p.json" -json "$url" >"$tmp/report.json"
echo "page: $(stat -c %s "$tmp/p.html") bytes, trace: $(stat -c %s "$tmp/p.json") bytes, $n requests"
(cd "$root/viztest" && go run ./cmd/loadtime "$tmp/p.html")
