#!/usr/bin/env bash
# proxy.sh: requests per second of hey through `connaudit proxy` to a
# local nginx, against hey to nginx directly and hey through the floor (a
# bare httputil.ReverseProxy with a tuned transport, bench/cmd/floorproxy:
# what any Go reverse proxy gets on this machine), at -c 1 and -c 8, the
# three measured in turn in each round; then the proxy's RSS over a 1 GiB
# upload streamed through it to a sink that reads it whole (okserver
# -read-body), and, with RSS_REQUESTS=N, its RSS over N requests.
#
#   bench/proxy.sh                          # N=20000, 5 rounds per concurrency
#   N=50000 ROUNDS=11 bench/proxy.sh
#   RSS_REQUESTS=1000000 bench/proxy.sh     # and the RSS over 1,000,000 requests
#
# Prints each round and, per concurrency, the median ratios: proxy ÷
# direct (aimed at: 0.9), floor ÷ direct (what the aim can be on this
# machine), proxy ÷ floor. Needs nginx, hey and curl.
set -euo pipefail

N=${N:-20000}
ROUNDS=${ROUNDS:-5}
CONCURRENCY=${CONCURRENCY:-"1 8"}
RSS_REQUESTS=${RSS_REQUESTS:-0}
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
(cd "$here" && go build -o "$tmp/floorproxy" ./cmd/floorproxy && go build -o "$tmp/okserver" ./cmd/okserver)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_nginx; rm -rf "$tmp"' EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ready() { # ready URL
	for _ in $(seq 100); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "proxy.sh: $1 does not answer" >&2
	exit 1
}

port=$(freeport)
"$tmp/connaudit" proxy -upstream "${url%/}" -listen "127.0.0.1:$port" >"$tmp/report.txt" 2>"$tmp/proxy.err" &
proxy_pid=$!
pids+=("$proxy_pid")
purl="http://127.0.0.1:$port/"
fport=$(freeport)
"$tmp/floorproxy" -upstream "${url%/}" -listen "127.0.0.1:$fport" >/dev/null &
pids+=($!)
furl="http://127.0.0.1:$fport/"
ready "$purl"
ready "$furl"

rps() { # rps URL C
	hey -n "$N" -c "$2" "$1" | sed -n 's/^[[:space:]]*Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }
echo "load: $(uptime)"
for c in $CONCURRENCY; do
	pd=() fd=() pf=()
	for r in $(seq "$ROUNDS"); do
		# Each round starts with the next of the three, so that none is
		# always measured first.
		case $((r % 3)) in
		1) d=$(rps "$url" "$c") f=$(rps "$furl" "$c") p=$(rps "$purl" "$c") ;;
		2) f=$(rps "$furl" "$c") p=$(rps "$purl" "$c") d=$(rps "$url" "$c") ;;
		0) p=$(rps "$purl" "$c") d=$(rps "$url" "$c") f=$(rps "$furl" "$c") ;;
		esac
		pd+=("$(ratio "$p" "$d")") fd+=("$(ratio "$f" "$d")") pf+=("$(ratio "$p" "$f")")
		printf 'c=%s round %s: direct %.0f/s, floor %.0f/s, proxy %.0f/s; proxy÷direct %s, floor÷direct %s, proxy÷floor %s\n' \
			"$c" "$r" "$d" "$f" "$p" "${pd[-1]}" "${fd[-1]}" "${pf[-1]}"
	done
	printf 'c=%s: median proxy÷direct %s, floor÷direct %s, proxy÷floor %s (%s rounds of %s requests)\n' "$c" \
		"$(printf '%s\n' "${pd[@]}" | median)" "$(printf '%s\n' "${fd[@]}" | median)" \
		"$(printf '%s\n' "${pf[@]}" | median)" "$ROUNDS" "$N"
done
echo "load: $(uptime)"

# The upload: a proxy of its own in front of a sink that reads the body
# whole and answers its length; its RSS sampled every 0.1s while 1 GiB
# streams through, and its high-water mark after.
status() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
"$tmp/okserver" -read-body >"$tmp/sink.url" &
pids+=($!)
for _ in $(seq 100); do [[ -s $tmp/sink.url ]] && break; sleep 0.05; done
sink=$(head -1 "$tmp/sink.url")
uport=$(freeport)
"$tmp/connaudit" proxy -upstream "${sink%/ok}" -listen "127.0.0.1:$uport" >/dev/null 2>&1 &
upid=$!
pids+=("$upid")
uurl="http://127.0.0.1:$uport/upload"
ready "http://127.0.0.1:$uport/ok"
before=$(status "$upid" VmRSS)
head -c 1073741824 /dev/zero | curl -sS -o "$tmp/upload.out" -w '%{http_code} %{size_upload}\n' -T - "$uurl" >"$tmp/upload.status" &
curl_pid=$!
samples=()
while kill -0 "$curl_pid" 2>/dev/null; do
	samples+=("$(status "$upid" VmRSS)")
	sleep 0.1
done
wait "$curl_pid" || true
read -r code sent <"$tmp/upload.status"
got=$(cat "$tmp/upload.out")
printf 'upload of 1 GiB: status %s, %s bytes sent (chunked), %s read by the sink\n' "$code" "$sent" "$got"
printf 'upload of 1 GiB: proxy RSS %s KiB before; during (%s samples) min %s, max %s KiB; max RSS (VmHWM) %s KiB\n' \
	"$before" "${#samples[@]}" "$(printf '%s\n' "${samples[@]}" | sort -n | head -1)" \
	"$(printf '%s\n' "${samples[@]}" | sort -n | tail -1)" "$(status "$upid" VmHWM)"

# RSS over many requests: hey at -c 8 through the first proxy, its RSS
# and its live line's request count every 2s.
if ((RSS_REQUESTS > 0)); then
	hey -n "$RSS_REQUESTS" -c 8 "$purl" >"$tmp/long.txt" &
	hey_pid=$!
	printf 'rss over %s requests: RSS %s KiB at the start\n' "$RSS_REQUESTS" "$(status "$proxy_pid" VmRSS)"
	while kill -0 "$hey_pid" 2>/dev/null; do
		sleep 2
		printf 'rss: %s KiB after %s\n' "$(status "$proxy_pid" VmRSS)" \
			"$(tail -1 "$tmp/proxy.err" | grep -o '[0-9]* requests' || echo '?')"
	done
	wait "$hey_pid" || true
	printf 'rss over %s requests: RSS %s KiB at the end, max RSS (VmHWM) %s KiB\n' "$RSS_REQUESTS" \
		"$(status "$proxy_pid" VmRSS)" "$(status "$proxy_pid" VmHWM)"
fi
