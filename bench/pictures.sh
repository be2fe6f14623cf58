#!/usr/bin/env bash
# pictures.sh: how long a probe's page of 5,000 connections takes to load
# in headless Chromium, and what the page and the trace cost a request on
# kept-alive connections. Not a test: numbers to read, against nginx on
# loopback.
#
#   bench/pictures.sh [CONNS]    (default 5000)
#   RUNS=3 KEEPALIVE="1000 10000" bench/pictures.sh
#
# First CONNS requests, each asking for its connection's close
# (-H "Connection: close"), so that CONNS requests make CONNS connections:
# the page's and the trace's size, then the page loaded RUNS times (default
# 3), each in a Chromium of its own (viztest/cmd/loadtime: navigation to
# the end of the load event). Then, for each N of KEEPALIVE (default
# "1000 10000"), `probe -n N -c 4` without that header (4 connections kept
# alive): the page's and the trace's bytes, and per 1,000 requests. The
# page draws the first 20,000 requests; the trace every one.
#
# Needs nginx, curl, jq and chromium (.ci/services installs nginx and
# chromium).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-5000}
runs=${RUNS:-3}
keepalive=${KEEPALIVE:-"1000 10000"}
# shellcheck source=nginx.sh
source "$root/bench/nginx.sh"
nginx_bench "$root"
(cd "$root/viztest" && go build -o "$tmp/loadtime" ./cmd/loadtime)

size() { stat -c %s "$1"; }

"$tmp/connaudit" probe -s -n "$n" -c 4 -H "Connection: close" -fail-on none \
	-html "$tmp/p.html" -trace-events "$tmp/p.json" -json "$url" >"$tmp/report.json"
echo "Connection: close, -n $n -c 4: $(jq .dials "$tmp/report.json") connections;" \
	"page: $(size "$tmp/p.html") bytes, trace: $(size "$tmp/p.json") bytes"
for i in $(seq "$runs"); do
	echo "load $i: $("$tmp/loadtime" "$tmp/p.html" | sed "s#^$tmp/##")"
done

for k in $keepalive; do
	"$tmp/connaudit" probe -s -n "$k" -c 4 -fail-on none \
		-html "$tmp/k.html" -trace-events "$tmp/k.json" -json "$url" >"$tmp/report.json"
	page=$(size "$tmp/k.html")
	trace=$(size "$tmp/k.json")
	echo "keep-alive, -n $k -c 4: $(jq .requests "$tmp/report.json") requests," \
		"$(jq .dials "$tmp/report.json") connections; page: $page bytes," \
		"$((page * 1000 / k)) per 1,000 requests; trace: $trace bytes, $((trace * 1000 / k)) per 1,000 requests"
done
