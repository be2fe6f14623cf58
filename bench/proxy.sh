#!/usr/bin/env bash
# proxy.sh: requests per second of hey through `connaudit proxy` to a
# local nginx against hey to nginx directly, at -c 1 and -c 8, measured
# alternately in one run; then the proxy's maximum RSS after a 1 GiB
# upload through it (curl) against its RSS before.
#
#   bench/proxy.sh                    # N=20000, 5 rounds per concurrency
#   N=50000 ROUNDS=11 bench/proxy.sh
#
# Prints each round and, per concurrency, the median ratio (proxy ÷
# direct); the target is 0.9 or more. Needs nginx, hey and curl.
set -euo pipefail

N=${N:-20000}
ROUNDS=${ROUNDS:-5}
CONCURRENCY=${CONCURRENCY:-"1 8"}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
for tool in "$nginx" hey curl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "proxy.sh: $tool is missing (.ci/services installs nginx and hey)" >&2
		exit 2
	fi
done
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nginx.sh
. "$here/nginx.sh"
nginx_bench "$(dirname "$here")"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/connaudit" proxy -upstream "${url%/}" -listen "127.0.0.1:$port" >"$tmp/report.txt" 2>"$tmp/proxy.err" &
proxy_pid=$!
trap 'kill $proxy_pid 2>/dev/null || true; stop_nginx; rm -rf "$tmp"' EXIT
purl="http://127.0.0.1:$port/"
for _ in $(seq 100); do
	curl -fsS -o /dev/null "$purl" 2>/dev/null && break
	sleep 0.05
done

rps() { # rps URL C
	hey -n "$N" -c "$2" "$1" | sed -n 's/^[[:space:]]*Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p'
}
for c in $CONCURRENCY; do
	ratios=()
	for r in $(seq "$ROUNDS"); do
		if ((r % 2)); then
			d=$(rps "$url" "$c")
			p=$(rps "$purl" "$c")
		else
			p=$(rps "$purl" "$c")
			d=$(rps "$url" "$c")
		fi
		ratio=$(python3 -c "print(f'{$p/$d:.3f}')")
		ratios+=("$ratio")
		printf 'c=%s round %s: direct %s/s, proxy %s/s, ratio %s\n' "$c" "$r" "$d" "$p" "$ratio"
	done
	median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf 'c=%s: median ratio %s (proxy ÷ direct, %s rounds of %s requests)\n' "$c" "$median" "$ROUNDS" "$N"
done

rss() { awk '/VmRSS/ {print $2}' "/proc/$proxy_pid/status"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$proxy_pid/status"; }
before=$(hwm)
code=$(head -c 1073741824 /dev/zero | curl -sS -o /dev/null -w "%{http_code}" -T - "${purl}upload" || true)
echo "upload of 1 GiB: status $code"
printf 'upload of 1 GiB: proxy max RSS %s KiB before, %s KiB after (RSS now %s KiB)\n' "$before" "$(hwm)" "$(rss)"
