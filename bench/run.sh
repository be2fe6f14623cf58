#!/usr/bin/env bash
# run.sh: runs the comparison benchmarks and prints benchstat tables.
#
#   bench/run.sh [OUTDIR]        # ROUNDS=10 BENCHTIME=1s by default
#
# The benchmarks of a round run one after the other, and the rounds follow
# each other (ROUNDS rounds of -count 1, rather than -count ROUNDS), so that
# the figures compared in a table were measured minutes apart at most, not
# a whole run apart: other load on the machine then biases no column.
#
# What runs, each from a test binary built once:
#   bench        BenchmarkSequential, BenchmarkParallel, BenchmarkTracer,
#                BenchmarkPaired (each client, and the busy-work
#                calibration clients, against plain, batches alternating
#                in one process: the overhead in percent)
#   pool         BenchmarkOverhead (plain vs traced+tracked, seq and par4),
#                BenchmarkOverheadPaired (the same, batches alternating)
#   httptrace    BenchmarkRoundTrip (plain, traced, traced-dialhooks)
#   pool         BenchmarkRoundTrip (plain, tracked, traced+tracked)
#   audit/probe  BenchmarkSendPaired (the probe's request path against
#                compare.sh's plain loop, batches alternating)
#   external     BenchmarkSequential, BenchmarkParallel, BenchmarkPaired,
#                pool's BenchmarkOverhead and the probe's
#                BenchmarkSendPaired against cmd/okserver in its own
#                process (CONNAUDIT_BENCH_URL): the client's allocations
#                alone
# Raw outputs go to OUTDIR (default: a new temporary directory).
set -euo pipefail

ROUNDS=${ROUNDS:-10}
BENCHTIME=${BENCHTIME:-1s}
BENCHSTAT=${BENCHSTAT:-$(command -v benchstat || echo /root/go/bin/benchstat)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-$(mktemp -d)}
mkdir -p "$out"
# shellcheck source=okserver.sh
. "$here/okserver.sh"
trap stop_okserver EXIT

(cd "$here" && go test -c -o "$out/bench.test" . && go build -o "$out/okserver" ./cmd/okserver)
(cd "$root" && go test -c -o "$out/pool.test" ./pool && go test -c -o "$out/httptrace.test" ./httptrace &&
	go test -c -o "$out/probe.test" ./probe)

start_okserver "$out/okserver" "$out/url" 2h

bench() { # binary pattern outfile [env...]
	local bin=$1 pat=$2 file=$3
	shift 3
	# A benchmark that fails (say, pool's own BenchmarkRoundTrip when the
	# Transport redialed under load) loses its line, not the run.
	if ! env "$@" "$out/$bin" -test.run '^$' -test.bench "$pat" -test.benchmem -test.benchtime "$BENCHTIME" >>"$out/$file"; then
		echo "run.sh: $bin -test.bench '$pat' failed (see $out/$file)" >&2
	fi
}

rm -f "$out"/*.txt
{
	echo "# $(date -u +%FT%TZ) ROUNDS=$ROUNDS BENCHTIME=$BENCHTIME"
	echo "# $(go version); nproc $(nproc)"
	lscpu | head -n 20 | sed 's/^/# /'
} >"$out/machine.txt"
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	bench bench.test 'Sequential|Parallel' clients.txt
	bench bench.test 'Tracer' tracer.txt
	bench pool.test 'Overhead$' overhead.txt
	bench bench.test 'Paired' paired.txt
	bench pool.test 'OverheadPaired' overhead-paired.txt
	bench httptrace.test 'RoundTrip' httptrace.txt
	bench pool.test 'RoundTrip' pool.txt
	bench probe.test 'SendPaired' send-paired.txt
	bench bench.test 'Sequential|Parallel' clients-external.txt CONNAUDIT_BENCH_URL="$url"
	bench pool.test 'Overhead$' overhead-external.txt CONNAUDIT_BENCH_URL="$url"
	bench bench.test 'Paired' paired-external.txt CONNAUDIT_BENCH_URL="$url"
	bench probe.test 'SendPaired' send-paired-external.txt CONNAUDIT_BENCH_URL="$url"
done

# Sub-benchmark names without key=value (the packages' own) become
# columns by their last element.
for f in httptrace pool; do
	sed -E 's#^BenchmarkRoundTrip/([^ \t]+)-([0-9]+)([ \t])#BenchmarkRoundTrip/client=\1-\2\3#' "$out/$f.txt" >"$out/$f-cols.txt"
done

cat "$out/machine.txt"
for f in clients tracer overhead clients-external overhead-external httptrace-cols pool-cols; do
	echo
	echo "## $f"
	"$BENCHSTAT" -col /client "$out/$f.txt"
done
# The paired benchmarks: each line is already a comparison; their
# overhead's median and confidence interval.
echo
for f in paired paired-external; do
	echo "## $f"
	"$BENCHSTAT" -col /client -filter '.unit:(overhead-% OR cpu-overhead-%)' "$out/$f.txt"
	echo
done
echo "## overhead-paired"
"$BENCHSTAT" -filter '.unit:(overhead-% OR cpu-overhead-% OR plain-sec/req OR traced-sec/req)' "$out/overhead-paired.txt"
echo
echo "## send-paired (the probe's request path), in process and external"
"$BENCHSTAT" -filter '.unit:(overhead-% OR cpu-overhead-%)' "$out/send-paired.txt" "$out/send-paired-external.txt"
echo
echo "raw outputs in $out" >&2
