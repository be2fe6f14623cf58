#!/usr/bin/env bash
# hey.sh: requests per second of `connaudit probe` against those of hey
# (rakyll/hey, the Debian package), both against a local nginx, at -c 1 and
# -c 8, measured alternately in one run.
#
#   bench/hey.sh                  # N=20000, 11 rounds per concurrency
#   N=50000 ROUNDS=21 bench/hey.sh
#   CONCURRENCY="1 8 32" bench/hey.sh
#
# nginx runs on 127.0.0.1 with a temporary configuration: one worker,
# keep-alive without a request limit, 200 "ok" on every path. Each round
# runs both tools with the same -n and -c, alternating which goes first,
# each with keep-alive on -c connections (hey's default; the probe with
# -conns C), and reads each tool's own figure: hey's "Requests/sec", the
# probe's requests_per_second (requests over the main run's time). It
# prints every round, then per concurrency the median ratio (probe ÷ hey)
# and, from 6 rounds on, a distribution-free 95 % confidence interval of
# the median (order statistics of the rounds' ratios). A ratio of 1 or
# more means the probe matches hey. Needs nginx, hey and jq.
set -euo pipefail

N=${N:-20000}
ROUNDS=${ROUNDS:-11}
CONCURRENCY=${CONCURRENCY:-"1 8"}
if ! [[ $ROUNDS =~ ^[0-9]+$ && $N =~ ^[0-9]+$ ]] || ((ROUNDS < 1 || N < 1)); then
	echo "hey.sh: N and ROUNDS must be positive integers" >&2
	exit 2
fi
for c in $CONCURRENCY; do
	if ! [[ $c =~ ^[0-9]+$ ]] || ((c < 1 || c > N)); then
		echo "hey.sh: each of CONCURRENCY must be an integer from 1 to N" >&2
		exit 2
	fi
done
nginx=$(command -v nginx || echo /usr/sbin/nginx)
for tool in "$nginx" hey jq curl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "hey.sh: $tool is missing (.ci/services installs nginx and hey; apt-get install jq)" >&2
		exit 2
	fi
done

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nginx.sh
. "$here/nginx.sh"
# shellcheck source=stats.sh
. "$here/stats.sh"
nginx_bench "$(dirname "$here")"

run_hey() {
	hey -n "$N" -c "$1" "$url" >"$tmp/hey.out"
	hey_rps=$(sed -n 's/^[[:space:]]*Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$tmp/hey.out")
	local ok
	ok=$(sed -n 's/^[[:space:]]*\[200\][[:space:]]*\([0-9]*\) responses.*/\1/p' "$tmp/hey.out")
	if [[ $ok != "$N" ]]; then
		echo "hey.sh: hey: $ok of $N responses 200" >&2
		cat "$tmp/hey.out" >&2
		exit 1
	fi
}
run_probe() {
	# stderr to a file: on a terminal the probe would draw a progress line.
	"$tmp/connaudit" probe -n "$N" -c "$1" -conns "$1" -json -fail-on none "$url" >"$tmp/probe.json" 2>"$tmp/probe.err"
	probe_rps=$(jq -r .requests_per_second "$tmp/probe.json")
	local ok dials
	ok=$(jq -r '.outcomes.ok // 0' "$tmp/probe.json")
	dials=$(jq -r .dials "$tmp/probe.json")
	if [[ $ok != "$N" || $dials != "$1" ]]; then
		echo "hey.sh: probe: $ok of $N requests ok, $dials dials (want $N, $1)" >&2
		exit 1
	fi
}

echo "nginx $("$nginx" -v 2>&1 | sed 's/.*\///'), $url, N=$N, $ROUNDS rounds; $(nproc) CPUs; $(go version)"
summary=()
for c in $CONCURRENCY; do
	printf "%-4s %-5s %-6s %12s %12s %7s\n" c round first "hey req/s" "probe req/s" ratio
	ratios=()
	for r in $(seq "$ROUNDS"); do
		if ((r % 2)); then
			first=hey
			run_hey "$c"
			run_probe "$c"
		else
			first=probe
			run_probe "$c"
			run_hey "$c"
		fi
		x=$(ratio "$probe_rps" "$hey_rps")
		ratios+=("$x")
		printf "%-4s %-5s %-6s %12.0f %12.0f %7s\n" "$c" "$r" "$first" "$hey_rps" "$probe_rps" "$x"
	done
	summary+=("-c $c: median ratio (probe req/s / hey req/s) $(median "${ratios[@]}")  95% CI $(ci "${ratios[@]}")")
done
printf "%s\n" "${summary[@]}"
