#!/usr/bin/env bash
# cachegrind.sh: what each client costs per request in instructions and
# cache misses, counted by valgrind's cachegrind. The counts hardly move
# from run to run, where timings on a shared machine move by 10 % or more,
# so a change of a few hundred instructions per request shows.
#
#   bench/cachegrind.sh [CLIENT...]      # default: every client of Clients
#   CONNAUDIT_BENCH_URL=http://127.0.0.1:PORT/ok bench/cachegrind.sh probe
#                                        # connaudit probe against compare.sh's
#                                        # plain loop, per request
#
# Each client's BenchmarkSequential (one goroutine, one kept-alive
# connection, GET + read to EOF + close) runs under cachegrind twice, with
# N1 and N2 requests (default 2000 and 12000), GOMAXPROCS=1 and GOGC=off
# (the collector's cycles would fall unevenly into the two runs); the
# difference of the two counts divided by N2-N1 is the cost of one
# request, set-up excluded. That is done REPEAT times (default 3) and the
# median printed: the scheduler's path through a request still varies a
# little with timing. Against the in-process server the counts are client
# and server together. With CONNAUDIT_BENCH_URL set (a bench/cmd/okserver,
# which does not run under valgrind) they are the client's alone.
#
# "probe" counts, the same way, `connaudit probe -n N -json -fail-on none`
# against `plainloop -n N -timeout 30s` (compare.sh's two programs), both
# against the server of CONNAUDIT_BENCH_URL: what the probe spends per
# request over a plain loop, its fixed costs excluded.
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
REPEAT=${REPEAT:-3}
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
[[ $REPEAT =~ ^[1-9]$ ]] || {
	echo "cachegrind.sh: REPEAT must be a whole number from 1 to 9, got '$REPEAT'" >&2
	exit 2
}
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
if [[ ${clients[*]:-} == probe ]]; then
	[[ -n ${CONNAUDIT_BENCH_URL:-} ]] || {
		echo "cachegrind.sh: probe needs CONNAUDIT_BENCH_URL (a bench/cmd/okserver)" >&2
		exit 2
	}
	(cd "$here" && go build -o "$work/plainloop" ./cmd/plainloop)
	(cd "$here/.." && go build -o "$work/connaudit" ./cmd/connaudit)
	clients=(plainloop probe)
elif ((${#clients[@]} == 0)); then
	# The names of Clients, as the benchmark prints them.
	mapfile -t clients < <(sed -n 's/^var Clients = \[\]string{\(.*\)}$/\1/p' "$here/workload.go" | tr -d '" ' | tr , '\n')
fi
[[ ${clients[0]} == plain* ]] || clients=(plain "${clients[@]}")

# count CLIENT N K: cachegrind's totals for N requests through CLIENT, as
# "Ir I1mr Dr+Dw D1mr+D1mw", the K-th time.
count() {
	local out="$work/$1.$2.$3" re cmd
	case $1 in
	plainloop) cmd=("$work/plainloop" -n "$2" -timeout 30s "$CONNAUDIT_BENCH_URL") ;;
	probe) cmd=("$work/connaudit" probe -n "$2" -json -fail-on none "$CONNAUDIT_BENCH_URL") ;;
	*)
		re=$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g')
		cmd=("$work/bench.test" -test.run '^$' -test.bench "^BenchmarkSequential\$/^client=$re\$" -test.benchtime "${2}x")
		;;
	esac
	GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$out.cg" \
		"${cmd[@]}" >"$out.log" 2>&1 || {
		echo "cachegrind.sh: $1 with $2 requests failed:" >&2
		tail -5 "$out.log" >&2
		return 1
	}
	case $1 in
	plainloop | probe) ;;
	*)
		awk -v b="BenchmarkSequential/client=$1" '$1 == b { ok = 1 } END { exit !ok }' "$out.log" || {
			echo "cachegrind.sh: no client $1" >&2
			return 1
		}
		;;
	esac
	awk '/^summary:/ { print $2, $3, $5 + $8, $6 + $9 }' "$out.cg" >"$out.sum"
}
export -f count
export work CONNAUDIT_BENCH_URL

# Two at a time (the counts hardly depend on timing), the clients
# interleaved within each repetition.
for k in $(seq "$REPEAT"); do
	for c in "${clients[@]}"; do
		printf '%s %s %s\n' "$c" "$N1" "$k" "$c" "$N2" "$k"
	done
done | xargs -P 2 -n 3 bash -c 'count "$0" "$1" "$2"'

echo "# per request, $((N2 - N1)) requests (N2=$N2 - N1=$N1), median of $REPEAT, GOMAXPROCS=1 GOGC=off, $(go version | cut -d' ' -f3)"
echo "# server: ${CONNAUDIT_BENCH_URL:-in process (counted too)}"
for c in "${clients[@]}"; do
	for k in $(seq "$REPEAT"); do
		read -r a1 a2 a3 a4 <"$work/$c.$N1.$k.sum"
		read -r b1 b2 b3 b4 <"$work/$c.$N2.$k.sum"
		echo "$(((b1 - a1) / (N2 - N1))) $(((b2 - a2) / (N2 - N1))) $(((b3 - a3) / (N2 - N1))) $(((b4 - a4) / (N2 - N1)))"
	done >"$work/$c.per"
	# The median of each column.
	line=$c
	for i in 1 2 3 4; do
		line+=" $(cut -d' ' -f"$i" "$work/$c.per" | sort -n | sed -n "$(((REPEAT + 1) / 2))p")"
	done
	echo "$line"
done | awk '
	NR == 1 { ir = $2; l1 = $3 + $5 }
	{ printf "%-16s %9d Ir %+7d %7d I1mr %7d D %6d D1m   L1 misses %+6d\n", $1, $2, $2 - ir, $3, $4, $5, $3 + $5 - l1 }'
