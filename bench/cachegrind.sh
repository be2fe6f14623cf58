#!/usr/bin/env bash
# cachegrind.sh: what each client costs per request in instructions and
# cache misses, counted by valgrind's cachegrind. The counts hardly move
# from run to run, where timings on a shared machine move by 10 % or more,
# so a change of a few hundred instructions per request shows.
#
#   bench/cachegrind.sh [CLIENT...]      # default: every client of Clients
#
# Each client's BenchmarkSequential (one goroutine, one kept-alive
# connection, GET + read to EOF + close) runs under cachegrind twice, with
# N1 and N2 requests (default 2000 and 12000) and GOMAXPROCS=1; the
# difference of the two counts divided by N2-N1 is the cost of one
# request, set-up excluded. Against the in-process server the counts are
# client and server together. With CONNAUDIT_BENCH_URL set (a
# bench/cmd/okserver, which does not run under valgrind) they are the
# client's alone.
#
# Columns: instructions (Ir), L1 instruction-cache misses (I1mr), data
# reads and writes (D), L1 data-cache misses (D1m), all per request, and
# each client's instructions and L1 misses over plain's. Cachegrind
# simulates the caches of one core of this machine's kind and sees no
# kernel code: the L1 misses are those of the program's own working set.
# It needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail

N1=${N1:-2000}
N2=${N2:-12000}
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null || {
	echo "cachegrind.sh: valgrind not found (Debian: apt-get install valgrind)" >&2
	exit 2
}
for n in "$N1" "$N2"; do
	[[ $n =~ ^[1-9][0-9]{0,6}$ ]] || {
		echo "cachegrind.sh: N1 and N2 must be whole numbers from 1 to 9999999, got '$n'" >&2
		exit 2
	}
done
((N2 > N1)) || {
	echo "cachegrind.sh: N2 ($N2) must be more than N1 ($N1)" >&2
	exit 2
}
if [[ -n ${CONNAUDIT_BENCH_URL:-} && ! $CONNAUDIT_BENCH_URL =~ ^http://(127\.0\.0\.1|\[::1\]|localhost):[0-9]+/ ]]; then
	echo "cachegrind.sh: CONNAUDIT_BENCH_URL must be an http URL on a loopback address, got '$CONNAUDIT_BENCH_URL'" >&2
	exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$here" && go test -c -o "$work/bench.test" .)

clients=("$@")
if ((${#clients[@]} == 0)); then
	# The names of Clients, as the benchmark prints them.
	mapfile -t clients < <(sed -n 's/^var Clients = \[\]string{\(.*\)}$/\1/p' "$here/workload.go" | tr -d '" ' | tr , '\n')
fi
[[ ${clients[0]} == plain ]] || clients=(plain "${clients[@]}")

# count CLIENT N: cachegrind's totals for N requests through CLIENT, as
# "Ir I1mr Dr+Dw D1mr+D1mw".
count() {
	local out="$work/$1.$2" re
	re=$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g')
	GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$out.cg" \
		"$work/bench.test" -test.run '^$' -test.bench "^BenchmarkSequential\$/^client=$re\$" \
		-test.benchtime "${2}x" >"$out.log" 2>&1 || {
		echo "cachegrind.sh: $1 with $2 requests failed:" >&2
		tail -5 "$out.log" >&2
		return 1
	}
	awk -v b="BenchmarkSequential/client=$1" '$1 == b { ok = 1 } END { exit !ok }' "$out.log" || {
		echo "cachegrind.sh: no client $1" >&2
		return 1
	}
	awk '/^summary:/ { print $2, $3, $5 + $8, $6 + $9 }' "$out.cg" >"$out.sum"
}
export -f count
export work

# Two at a time: the counts do not depend on timing.
for c in "${clients[@]}"; do
	printf '%s %s\n' "$c" "$N1" "$c" "$N2"
done | xargs -P 2 -n 2 bash -c 'count "$0" "$1"'

echo "# per request, $((N2 - N1)) requests (N2=$N2 - N1=$N1), GOMAXPROCS=1, $(go version | cut -d' ' -f3)"
echo "# server: ${CONNAUDIT_BENCH_URL:-in process (counted too)}"
for c in "${clients[@]}"; do
	read -r a1 a2 a3 a4 <"$work/$c.$N1.sum"
	read -r b1 b2 b3 b4 <"$work/$c.$N2.sum"
	echo "$c $(((b1 - a1) / (N2 - N1))) $(((b2 - a2) / (N2 - N1))) $(((b3 - a3) / (N2 - N1))) $(((b4 - a4) / (N2 - N1)))"
done | awk '
	NR == 1 { ir = $2; l1 = $3 + $5 }
	{ printf "%-16s %9d Ir %+7d %7d I1mr %7d D %6d D1m   L1 misses %+6d\n", $1, $2, $2 - ir, $3, $4, $5, $3 + $5 - l1 }'
