#!/usr/bin/env bash
# memory.sh: the maximum resident set size of `connaudit probe` against a
# local nginx as the number of requests grows, with and without -v (each
# timeline written as it ends, text or JSON Lines), measured with
# /usr/bin/time -v. The probe's memory should not grow with -n.
#
#   bench/memory.sh                       # -n 10000 and 1000000, -c 8
#   SIZES="10000 100000 1000000" C=8 bench/memory.sh
#
# It prints one line per run: the flags, the requests that got a
# response, the maximum RSS in MB, the wall time and the requests per
# second, and for each mode the ratio of the largest -n's RSS to the
# smallest's. Output (the report, the timelines) goes to /dev/null. Needs
# nginx, curl and jq.
set -euo pipefail

SIZES=${SIZES:-"10000 1000000"}
C=${C:-8}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nginx.sh
. "$here/nginx.sh"
nginx_bench "$(dirname "$here")"

# measure LABEL ARGS... runs the probe with ARGS and prints its line; it
# sets rss to the maximum RSS in kB.
measure() {
	local label=$1
	shift
	/usr/bin/time -v -o "$tmp/time" "$tmp/connaudit" probe -fail-on none "$@" "$url" >"$tmp/out" 2>"$tmp/err" || true
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
	local wall ok rps
	wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time")
	# The report is the last JSON value of the output (after the
	# timelines' lines with -v -json); without -json, ask for it again
	# from the text's first line.
	if [[ $label == *json* ]]; then
		ok=$(tail -n 1 "$tmp/out" | jq -r '.outcomes.ok // 0')
		rps=$(tail -n 1 "$tmp/out" | jq -r '.requests_per_second | floor')
	else
		ok=$(sed -n 's/^requests  *\([0-9]*\) in .*ok \([0-9]*\).*/\2/p' "$tmp/out" | head -n 1)
		rps=$(sed -n 's/^requests .*(\([0-9.]*\)\/s).*/\1/p' "$tmp/out" | head -n 1)
	fi
	printf "%-18s %-10s %10s %9.1f MB %10s %9s req/s\n" "$label" "$n" "$ok" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$wall" "$rps"
}

echo "nginx on $url; $(nproc) CPUs; $(go version); probe -c $C"
printf "%-18s %-10s %10s %12s %10s %15s\n" mode -n ok "max RSS" wall "rate"
summary=()
for mode in plain v v-json; do
	first="" last=""
	for n in $SIZES; do
		case $mode in
		plain) measure "plain" -n "$n" -c "$C" ;;
		v) measure "-v" -n "$n" -c "$C" -v ;;
		v-json) measure "-v -json" -n "$n" -c "$C" -v -json ;;
		esac
		if [[ -z $first ]]; then first=$rss; fi
		last=$rss
	done
	summary+=("$mode: max RSS at the largest -n / at the smallest: $(awk -v a="$last" -v b="$first" 'BEGIN { printf "%.2f", a / b }')")
done
printf "%s\n" "${summary[@]}"
