#!/usr/bin/env bash
# An example client audited by connaudit serve: curl configured from each
# scenario's policy with its own flags — --max-time (the attempt limit),
# --connect-timeout, --speed-limit/--speed-time (the read interval, in
# whole seconds), --retry/--retry-delay/--retry-max-time (the retries).
#
#   connaudit serve -- kits/curl/example.sh
#
# curl keeps an idle connection for 118 s: a cached connection idle longer is
# closed when found, not reused (libcurl's CURLOPT_MAXAGE_CONN, 118 by default
# in lib/url.c; the curl tool has no option to set it); the connection cache
# lives as long as the invocation. Before reusing a connection curl checks
# that the server has not closed it. The tool has no HTTP/2 health check: its
# PINGs (CURLOPT_UPKEEP_INTERVAL_MS) are sent only when an application calls
# curl_easy_upkeep. A connection whose HTTP/2 transfer timed out stays in the
# cache and takes the invocation's next transfer (h2/go-dark).
#
# curl has no total budget that ends a call: --retry-max-time is checked
# before each retry's delay, the delay not counted, and then curl hands back
# the last response; --max-time bounds each attempt; both take whole seconds
# (retry/total-budget: not configurable).
#
# CONNAUDIT_EXAMPLE=retry-500 configures curl against contract A5 (a 500 is
# retried: curl's --retry always does), for the test that a broken
# configuration fails the contract it breaks.
set -uo pipefail
. "$(dirname "$0")/kit.sh"

# ceil_s MS: whole seconds, at least 1.
ceil_s() { awk -v m="$1" 'BEGIN{s=int((m+999)/1000); if (s<1) s=1; print s}'; }
# secs MS: seconds with fractions.
secs() { awk -v m="$1" 'BEGIN{printf "%.3f", m/1000}'; }

curl_options() {
	local p
	p=$(jq -c .policy <<<"$1")
	local attempt connect tls read retries delay total method anym keyed haskey perkey pool
	read -r attempt connect tls read retries delay total pool < <(jq -r \
		'[.attempt_timeout_ms, .connect_timeout_ms, .tls_timeout_ms, .read_timeout_ms, .max_retries, .delay_ms, .total_timeout_ms, .pool_max_per_host] | @tsv' <<<"$p")
	perkey=$(jq -r '.request.key_per_attempt // ""' <<<"$1")
	if [ -n "$perkey" ]; then
		echo "NOT_CONFIGURABLE: curl sends the headers given, the same on every --retry attempt"
		return
	fi
	if [ "$pool" != 0 ]; then
		echo "NOT_CONFIGURABLE: curl has no pool of one whose second caller is refused after an acquire timeout"
		return
	fi
	method=$(jq -r .request.method <<<"$1")
	anym=$(jq -r .retry_any_method <<<"$p")
	keyed=$(jq -r .retry_with_idempotency_key <<<"$p")
	haskey=$(jq -r '.request.headers["Idempotency-Key"] // ""' <<<"$1")
	local replayable=false
	if jq -e --arg m "$method" '.retry_methods | index($m)' <<<"$p" >/dev/null || [ "$anym" = true ] ||
		{ [ "$keyed" = true ] && [ -n "$haskey" ]; }; then
		replayable=true
	fi
	if [ "${CONNAUDIT_EXAMPLE:-}" = retry-500 ] && [ "$(jq -r .name <<<"$1")" = retry/500 ]; then
		retries=2 replayable=true
	fi
	# A budget that runs out within the delays must end the call (A8):
	# curl's cannot. --retry-max-time is checked before each retry's delay,
	# the delay not counted, and then curl hands back the last response;
	# --max-time bounds each attempt (serve/truth_curl_test.go measures it).
	if [ "$total" != 0 ] && [ "$retries" != 0 ] && [ "$replayable" = true ] &&
		awk -v r="$retries" -v d="$delay" -v t="$total" 'BEGIN{exit !(r*d > t)}'; then
		echo "NOT_CONFIGURABLE: curl cannot end a call when its retry budget runs out: --retry-max-time is checked before each retry's delay (not counted) and then the last response is handed back, no timeout; --max-time bounds each attempt"
		return
	fi
	if [ "$(jq -r '.send_ping_timeout_ms // 0' <<<"$p")" != 0 ]; then
		echo "NOTE: no HTTP/2 health check in the curl tool (libcurl's upkeep PINGs, sent only when an application calls curl_easy_upkeep, keep a connection alive)"
	fi
	[ "$attempt" != 0 ] && printf -- '--max-time\n%s\n' "$(secs "$attempt")"
	local c
	c=$(awk -v a="$connect" -v b="$tls" 'BEGIN{print (a>b)?a:b}')
	[ "$c" != 0 ] && printf -- '--connect-timeout\n%s\n' "$(secs "$c")"
	[ "$read" != 0 ] && printf -- '--speed-limit\n1\n--speed-time\n%s\n' "$(ceil_s "$read")"
	if [ "$retries" != 0 ] && [ "$replayable" = true ]; then
		printf -- '--retry\n%s\n--retry-delay\n%s\n' "$retries" "$(ceil_s "$delay")"
		[ "$total" != 0 ] && printf -- '--retry-max-time\n%s\n' "$(ceil_s "$total")"
	fi
	return 0
}

version=$(curl --version | head -1 | cut -d' ' -f2)
# 118000: CURLOPT_MAXAGE_CONN's default, in ms.
kit_run curl "$version" "curl's own --max-time, --connect-timeout, --speed-time, --retry from each policy" '["http1","h2"]' 118000 \
	"$(dirname "$0")/curl.terms.json"
