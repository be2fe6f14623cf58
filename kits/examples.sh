#!/usr/bin/env bash
# Runs every kit's example client at once against the connaudit serve that
# runs this script (connaudit serve -- kits/examples.sh), each in a session
# of its own. Each example exits 1 when its session has a failed verdict:
# connaudit prints and judges the verdicts, so this script fails only when
# an example could not run its session to the end (exit status 2 or more).
set -uo pipefail
cd "$(dirname "$0")"
py=${CONNAUDIT_PYTHON:-python/.venv/bin/python}
pids=()
curl/example.sh >/dev/null & pids+=($!)
# Every example of the Python and Node kits: a new one runs here as it is
# added to its kit's folder.
for ex in python/example_*.py; do
	"$py" "$ex" & pids+=($!)
done
for ex in node/example_*.mjs; do
	node "$ex" & pids+=($!)
done
status=0
for p in "${pids[@]}"; do
	wait "$p"
	rc=$?
	if [ "$rc" -gt 1 ]; then
		echo "examples: an example exited $rc" >&2
		status=1
	fi
done
exit $status
