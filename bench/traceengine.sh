#!/usr/bin/env bash
# traceengine.sh: a probe's trace file (-trace-events) against nginx on
# loopback, parsed by Chrome DevTools' own trace engine
# (@paulirish/trace_engine, pinned in bench/traceengine/package-lock.json)
# and checked against the probe's JSON report: every connection has its
# tracks, every request its slice, stages nested in requests
# (bench/traceengine/check.mjs says what exactly). Not a test: a check to
# run by hand after a change to the trace's format.
#
#   bench/traceengine.sh [N]      (default 100000 requests, -c 4, keep-alive)
#
# Needs nginx, curl, Node 20 and npm (npm ci installs the engine into
# bench/traceengine/node_modules). Exits 1 when the engine cannot parse the
# file or the counts differ. About 7 s at the default on 2 CPUs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-100000}
c=${C:-4}
(cd "$root/bench/traceengine" && npm ci --no-audit --no-fund --loglevel=error)
# shellcheck source=nginx.sh
source "$root/bench/nginx.sh"
nginx_bench "$root"
"$tmp/connaudit" probe -s -n "$n" -c "$c" -fail-on none \
	-trace-events "$tmp/trace.json" -json "$url" >"$tmp/report.json"
echo "connaudit probe -n $n -c $c against nginx on loopback (keep-alive)"
node "$root/bench/traceengine/check.mjs" "$tmp/trace.json" "$tmp/report.json"
