#!/usr/bin/env bash
# serve_rss.sh: the resident memory of a `connaudit serve` server over
# 10,000 sessions, which should stay flat: an ended session's verdicts are
# written out as it ends and nothing of it is kept but, for a failed one,
# a line for the exit status (and its id among the last 1024).
#
#   bench/serve_rss.sh                  # 10,000 passing sessions, text
#   N=10000 AT=0,1000,5000,10000 bench/serve_rss.sh -fail -json
#
# It builds connaudit from this tree and cmd/serverss, which starts
# `connaudit serve -run '^ok$'` (verdicts to /dev/null), runs N sessions
# one after the other through the control API (open, the "ok" scenario's
# request and /ok, report, done) and prints the server's VmRSS and VmHWM
# in kB at each count of AT. Extra arguments go to serverss (-fail: every
# session fails; -json). CONNAUDIT=PATH measures another build instead.
set -euo pipefail

N=${N:-10000}
AT=${AT:-0,1000,5000,10000}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${CONNAUDIT:-}
if [[ -z $bin ]]; then
	(cd "$here/.." && go build -o "$tmp/connaudit" ./cmd/connaudit)
	bin=$tmp/connaudit
fi
(cd "$here" && go build -o "$tmp/serverss" ./cmd/serverss)
"$tmp/serverss" -connaudit "$bin" -n "$N" -at "$AT" "$@"
