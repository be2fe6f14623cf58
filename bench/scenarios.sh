#!/usr/bin/env bash
# scenarios.sh: the catalogue's wall time against its longest wait, side by
# side and one at a time, and whether the verdicts agree.
#
#   bench/scenarios.sh            # RUNS=5 by default
#
# Each run is `connaudit scenarios -json` (8 at once, the default) and
# `-parallel 1`; for each it prints elapsed, the sum of the scenarios'
# inherent waits, the longest single wait, and elapsed ÷ longest. The
# target of the parallel runner is elapsed ≤ 1.6 × the longest wait. It
# fails if a scenario's verdict (pass, mismatches' kinds, fix) differs
# between the two modes or between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/connaudit" ./cmd/connaudit

verdicts() { # the verdicts of a JSON report, one line per scenario
	jq -r '.results[] | [.name, (.pass|tostring), ([.mismatches[]? | split(":")[0]] | join(";")), (.fix // "")] | @tsv' "$1"
}

first=""
for i in $(seq 1 "$RUNS"); do
	for mode in 8 1; do
		out="$bin/run-$i-$mode.json"
		"$bin/connaudit" scenarios -json -parallel "$mode" >"$out" || true
		jq -r --arg mode "$mode" '[.elapsed_ns, .wait_ns, ([.results[].wait_ns] | max)] as [$e, $w, $m] |
			"parallel \($mode): elapsed \($e/1e9)s, waits \($w/1e9)s, longest \($m/1e9)s, elapsed/longest \(($e/$m*100|round)/100)"' "$out"
		verdicts "$out" >"$out.v"
		if [ -z "$first" ]; then
			first="$out.v"
		elif ! diff -q "$first" "$out.v" >/dev/null; then
			echo "verdicts differ between $(basename "$first") and $(basename "$out"):"
			diff "$first" "$out.v" || true
			exit 1
		fi
	done
done
echo "verdicts: the same in all $((RUNS * 2)) runs"
