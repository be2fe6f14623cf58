#!/usr/bin/env bash
# compare.sh: requests per second of `connaudit probe -n N` against those
# of a plain Go loop (cmd/plainloop) doing the same requests on one
# kept-alive connection, both against cmd/okserver on 127.0.0.1.
#
#   bench/compare.sh            # N=2000, 21 rounds
#   N=5000 ROUNDS=31 bench/compare.sh
#   PLAIN_TIMEOUT=0 bench/compare.sh   # the plain loop without a per-request bound
#
# The plain loop bounds each request with http.Client.Timeout (PLAIN_TIMEOUT,
# default 30s), as the probe bounds each with its -timeout (default 30s).
#
# Each round runs both commands, alternating which goes first, and times
# each the same way: wall time from `date +%s%N` around the command
# (process start and exit included). It also shows each program's own
# figure (the probe's elapsed_ns, plainloop's elapsed_ns), which leaves
# process start-up out. The ratio is probe req/s ÷ plain req/s; the target
# is at least 0.95. It prints every round, the median ratios and, for the
# median, a distribution-free 95 % confidence interval (order statistics of
# the rounds' ratios; at least 6 rounds): one run of a few hundred
# milliseconds per program varies by 10 % or more here, so a single round
# says little.
set -euo pipefail

N=${N:-2000}
ROUNDS=${ROUNDS:-21}
PLAIN_TIMEOUT=${PLAIN_TIMEOUT:-30s}
if ! [[ $ROUNDS =~ ^[0-9]+$ && $N =~ ^[0-9]+$ ]] || ((ROUNDS < 1 || N < 1)); then
	echo "compare.sh: N and ROUNDS must be positive integers" >&2
	exit 2
fi
unit='[0-9]+([.][0-9]+)?(ns|us|ms|s|m|h)'
if ! [[ $PLAIN_TIMEOUT =~ ^($unit)+$ || $PLAIN_TIMEOUT == 0 ]]; then
	echo "compare.sh: PLAIN_TIMEOUT must be a duration such as 30s, or 0" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
tmp=$(mktemp -d)
# shellcheck source=okserver.sh
. "$here/okserver.sh"
# shellcheck source=stats.sh
. "$here/stats.sh"
cleanup() {
	stop_okserver
	rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$root" && go build -o "$tmp/connaudit" ./cmd/connaudit)
(cd "$here" && go build -o "$tmp/plainloop" ./cmd/plainloop && go build -o "$tmp/okserver" ./cmd/okserver)

start_okserver "$tmp/okserver" "$tmp/url" 30m

now() { date +%s%N; }
run_plain() {
	local t0 t1
	t0=$(now)
	"$tmp/plainloop" -n "$N" -timeout "$PLAIN_TIMEOUT" "$url" >"$tmp/plain.out"
	t1=$(now)
	plain_wall=$((t1 - t0))
	plain_self=$(sed -n 's/.*elapsed_ns \([0-9]*\).*/\1/p' "$tmp/plain.out")
}
run_probe() {
	local t0 t1
	t0=$(now)
	# stderr to a file: on a terminal the probe would draw a progress line.
	"$tmp/connaudit" probe -n "$N" -json -fail-on none "$url" >"$tmp/probe.json" 2>"$tmp/probe.err"
	t1=$(now)
	probe_wall=$((t1 - t0))
	probe_self=$(jq -r .elapsed_ns "$tmp/probe.json")
	local ok dials
	ok=$(jq -r '.outcomes.ok // 0' "$tmp/probe.json")
	dials=$(jq -r .dials "$tmp/probe.json")
	if [[ $ok != "$N" || $dials != 1 ]]; then
		echo "compare.sh: probe: $ok of $N requests ok, $dials dials (want $N, 1)" >&2
		exit 1
	fi
}
rps() { awk -v n="$N" -v ns="$1" 'BEGIN { printf "%.0f", n * 1e9 / ns }'; }

echo "server $url, N=$N, $ROUNDS rounds, plain loop timeout $PLAIN_TIMEOUT; $(nproc) CPUs; $(go version)"
printf "%-5s %-11s %12s %12s %7s   %12s %12s %7s\n" round first "plain req/s" "probe req/s" ratio "plain(self)" "probe(self)" ratio
walls=()
selfs=()
for r in $(seq "$ROUNDS"); do
	if ((r % 2)); then
		first=plainloop
		run_plain
		run_probe
	else
		first=probe
		run_probe
		run_plain
	fi
	w=$(ratio "$plain_wall" "$probe_wall")
	s=$(ratio "$plain_self" "$probe_self")
	walls+=("$w")
	selfs+=("$s")
	printf "%-5s %-11s %12s %12s %7s   %12s %12s %7s\n" "$r" "$first" \
		"$(rps "$plain_wall")" "$(rps "$probe_wall")" "$w" \
		"$(rps "$plain_self")" "$(rps "$probe_self")" "$s"
done
echo "median ratio (probe req/s / plain req/s), wall time: $(median "${walls[@]}")  95% CI $(ci "${walls[@]}")"
echo "median ratio, each program's own elapsed time:      $(median "${selfs[@]}")  95% CI $(ci "${selfs[@]}")"
