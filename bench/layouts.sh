#!/usr/bin/env bash
# layouts.sh: BenchmarkPaired's overheads over plain, measured on several
# code layouts of the same source. A client's overhead of a few percent
# moves by a point or more with where the linker puts functions (the same
# code, one layout to another), more than the differences between the
# clients compared here; one binary's figure is one draw of that layout.
# This script builds the bench test binary LAYOUTS times with the
# linker's -randlayout (seeds 1..LAYOUTS; seed 0 is the linker's own
# order), runs each ROUNDS times in turn (binaries alternating, so that a
# change of the machine's state over the run falls on all alike), and
# prints, per client and mode, the median over all runs, the spread of
# the layouts' medians, and the default layout's median beside them.
#
#   bench/layouts.sh                          # 8 layouts, 2 rounds, GOMAXPROCS=1
#   LAYOUTS=12 ROUNDS=3 bench/layouts.sh
#   PROCS=2 CLIENTS='traced|httpstat' bench/layouts.sh
#
# GOMAXPROCS=1 by default: with two cores the paired medians move by
# 3-4 points from run to run here (see RESULTS.md, the ninth round).
# OUT=file keeps the raw benchmark lines.
set -euo pipefail

LAYOUTS=${LAYOUTS:-8}
ROUNDS=${ROUNDS:-2}
PROCS=${PROCS:-1}
MODES=${MODES:-seq|par4}
CLIENTS=${CLIENTS:-'traced|traced\+tracked|httpstat|min-recorder'}
for v in LAYOUTS ROUNDS PROCS; do
	if ! [[ ${!v} =~ ^[0-9]+$ ]] || ((${!v} < 1 || ${!v} > 64)); then
		echo "layouts.sh: $v must be an integer from 1 to 64" >&2
		exit 2
	fi
done
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OUT=${OUT:-$tmp/layouts.txt}
: >"$OUT"

seeds=(0 $(seq "$LAYOUTS"))
for s in "${seeds[@]}"; do
	flags=()
	((s > 0)) && flags=(-ldflags=-randlayout=$s)
	(cd "$here" && go test -c "${flags[@]}" -o "$tmp/layout$s.test" .)
done
for r in $(seq "$ROUNDS"); do
	for s in "${seeds[@]}"; do
		echo "# layout=$s round=$r load=$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT"
		GOMAXPROCS=$PROCS "$tmp/layout$s.test" -test.run '^$' \
			-test.bench "Paired/mode=($MODES)/client=($CLIENTS)\$" -test.count 1 2>&1 |
			grep '^Benchmark' >>"$OUT"
	done
done

awk '
/^# layout=/ { split($2, a, "="); layout = a[2]; next }
/^BenchmarkPaired/ {
	split($1, p, "/"); mode = substr(p[2], 6); client = substr(p[3], 8); sub(/-[0-9]+$/, "", client)
	for (i = 2; i < NF; i++) if ($(i+1) == "overhead-%") v = $i
	key = mode " " client; keys[key] = 1
	if (layout == 0) { d[key, ++nd[key]] = v } else { all[key, ++na[key]] = v; l[key, layout, ++nl[key, layout]] = v; layouts[layout] = 1 }
}
function median(arr, key, n,    i, j, t, x) {
	for (i = 1; i <= n; i++) x[i] = arr[key, i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j-1] > x[j]; j--) { t = x[j]; x[j] = x[j-1]; x[j-1] = t }
	return n % 2 ? x[(n+1)/2] : (x[n/2] + x[n/2+1]) / 2
}
END {
	printf "%-5s %-16s %22s %22s %14s\n", "mode", "client", "random layouts: median", "layout medians: range", "linker order"
	for (key in keys) {
		lo = 1e9; hi = -1e9
		for (s in layouts) {
			n = nl[key, s]; for (i = 1; i <= n; i++) y[key, i] = l[key, s, i]
			m = median(y, key, n); if (m < lo) lo = m; if (m > hi) hi = m
		}
		split(key, k, " ")
		printf "%-5s %-16s %20.1f %% %12.1f .. %4.1f %% %12.1f %%\n", k[1], k[2], median(all, key, na[key]), lo, hi, median(d, key, nd[key])
	}
}' "$OUT" | sort
if [[ $OUT == "$tmp"/* ]]; then
	echo "(OUT=file keeps the raw lines)"
else
	echo "raw lines: $OUT"
fi
