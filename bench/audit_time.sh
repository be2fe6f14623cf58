#!/usr/bin/env bash
# audit_time.sh: how long a service's go test audit of its transport takes,
# against the transport's longest bound, and of its retry layer alone.
#
#   bench/audit_time.sh            # RUNS=3 by default
#
# It builds, outside the repository, the test a service writes from the
# README: audittest.Run over a service transport (3s dial, 3s TLS, 10s
# ResponseHeaderTimeout, 90s IdleConnTimeout, ForceAttemptHTTP2, body idle
# 2s), at the defaults (no audit.Parallel, no go test -parallel), and
# audittest.RunContracts over the same transport with a retry layer of the
# caller's (package retry's policy, given with audit.WithRetry), whose
# contracts run one at a time. The test
# binary is built first; the time is the binary's wall time, verdicts
# failing or not. For each run it prints both wall times and the
# transport's audit ÷ its longest bound (10s), to two places; it fails when
# that is above 1.60.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
repo=$(pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/go.mod" <<MOD
module example.com/auditime

go 1.26.0

require github.com/connaudit/connaudit v0.0.0

replace github.com/connaudit/connaudit => $repo
MOD
cat >"$dir/audit_test.go" <<'GO'
package auditime

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/audit"
	"github.com/connaudit/connaudit/audit/audittest"
	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/retry"
)

func newServiceTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   3 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
		ForceAttemptHTTP2:     true,
	}
}

func TestClient(t *testing.T) {
	audittest.Run(t, audit.WithTransport("service", newServiceTransport, pool.BodyIdleTimeout(2*time.Second)))
}

func TestRetryLayer(t *testing.T) {
	audittest.RunContracts(t, audit.WithTransport("service", newServiceTransport, pool.BodyIdleTimeout(2*time.Second)),
		audit.WithRetry("ours", func(p retry.Policy) (audit.RetryFunc, error) { return p.Do, nil }))
}
GO
(cd "$dir" && go mod tidy >/dev/null 2>&1 && go test -c -o auditime.test .)

longest=10 # the transport's longest bound, in seconds
wall() { # wall seconds of the test binary running test $1
	local start end
	start=$(date +%s.%N)
	"$dir/auditime.test" -test.run "^$1\$" -test.count=1 -test.v >"$dir/$1.out" 2>&1 || true
	end=$(date +%s.%N)
	echo "$end - $start" | bc
}
count() { # the scenarios a test ran, by verdict
	local f="$dir/$1.out"
	printf '%s passed, %s failed, %s skipped' "$(grep -c '^    --- PASS' "$f")" "$(grep -c '^    --- FAIL' "$f")" \
		"$(grep -c '^    --- SKIP' "$f")"
}
worst=0
for i in $(seq 1 "$RUNS"); do
	client=$(wall TestClient)
	layer=$(wall TestRetryLayer)
	ratio=$(printf '%.2f' "$(echo "scale=4; $client / $longest" | bc)")
	printf 'run %d: transport %.1fs (%s), ÷ longest bound %ss: %s; retry layer alone %.1fs (%s)\n' \
		"$i" "$client" "$(count TestClient)" "$longest" "$ratio" \
		"$layer" "$(count TestRetryLayer)"
	if [ "$(echo "$ratio > $worst" | bc)" = 1 ]; then worst=$ratio; fi
done
if [ "$(echo "$worst > 1.6" | bc)" = 1 ]; then
	echo "FAIL: the transport's audit took $worst × its longest bound (target ≤ 1.6)"
	exit 1
fi
echo "ok: the transport's audit within $worst × its longest bound (target ≤ 1.6)"
