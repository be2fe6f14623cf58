#!/usr/bin/env bash
# The curl kit of connaudit serve (docs/serve.md, protocol connaudit.serve/v1).
#
# Source it, define curl_options (below), then call kit_run. It needs bash,
# curl (7.75 or later, for -w %{exitcode} and %{errormsg}) and jq.
#
#   curl_options SCENARIO_JSON   prints the options of the curl under test
#                                for one scenario, one per line, from its
#                                "policy", and "NOTE: text" lines that the
#                                report's config shows; or prints
#                                "NOT_CONFIGURABLE: why"
#   kit_run NAME VERSION CONFIG [PROTOCOLS [IDLE_TIMEOUT_MS [TERMS_FILE]]]
#                                runs every scenario the server offers,
#                                prints a line of the session's counts and
#                                exits 0 if the session is ok, 1 if not;
#                                IDLE_TIMEOUT_MS is the client's declared
#                                idle timeout (client.idle_timeout_ms),
#                                "null" when unknown; TERMS_FILE a JSON file
#                                of what fixes each failure in the client's
#                                own terms (client.terms: curl.terms.json)
#
# A scenario's requests run in one curl invocation (--next): curl's
# connection cache lives as long as the process. The control requests a
# scenario needs between them (close_url, settle_url) are transfers of that
# invocation too, each with options of its own and on a connection of its own
# (the control address is another host:port than the fault listeners'): curl
# has no way to pause between two transfers.
#
# Environment: CONNAUDIT_URL (the control API), CONNAUDIT_CA (the CA of the
# HTTPS listeners), both set by `connaudit serve -- CMD`.
set -uo pipefail

: "${CONNAUDIT_URL:?CONNAUDIT_URL is not set: run me under connaudit serve -- CMD}"
: "${CONNAUDIT_CA:?CONNAUDIT_CA is not set}"
KIT_TMP=$(mktemp -d)
trap 'rm -rf "$KIT_TMP"' EXIT

# ctl METHOD URL [BODY]: a control request, through a curl of its own.
ctl() {
	local out code
	out=$(curl -sS -X "$1" -H 'Content-Type: application/json' --max-time 30 \
		${3:+--data-binary "$3"} -w '\n%{http_code}' "$2") || { echo "kit: $1 $2 failed" >&2; return 1; }
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	if [ "${code:0:1}" != 2 ]; then
		echo "kit: $1 $2: $code $out" >&2
		return 1
	fi
	printf '%s' "$out"
}

# kind_of EXITCODE: the protocol's error kind of a curl exit code.
kind_of() {
	case "$1" in
	28) echo timeout ;;
	5 | 6 | 7 | 16 | 18 | 35 | 52 | 55 | 56 | 92 | 95) echo connection ;;
	*) echo other ;;
	esac
}

# outcome_json "CODE EXIT TIME MESSAGE…": an outcome object of one -w line.
outcome_json() {
	local code exit time msg
	read -r code exit time msg <<<"$1"
	if [ "${exit:-1}" = 0 ] || [ "${exit:-1}" = 23 ] && [ "${code:-000}" != 000 ]; then
		# 23: the kit closed the body early (read-then-close).
		jq -nc --argjson s "$code" --argjson t "$time" '{status: $s, elapsed_ms: ($t * 1000)}'
	else
		jq -nc --arg k "$(kind_of "${exit:-1}")" --arg m "curl: ($exit) $msg" --argjson t "${time:-0}" \
			'{error: {kind: $k, message: $m}, elapsed_ms: ($t * 1000)}'
	fi
}

# The -w lines: F for the faulted transfer, K for /ok, N for a warm-up, C
# for a control request.
# A transfer curl gives up without writing its line (a failure of the
# output, say) has none: its outcome comes from curl's own error line.
W='F %{http_code} %{exitcode} %{time_total} %{errormsg}\n'
WK='K %{http_code} %{exitcode} %{time_total} %{errormsg}\n'
WN='N %{http_code} %{exitcode} %{time_total} %{errormsg}\n'
WC='C %{http_code} %{exitcode} %{time_total}\n'

# pick TAG LINES…: the line tagged TAG, without its tag; else one made of
# the first "curl: (N) message" on stderr.
pick() {
	local tag=$1 l
	shift
	for l in "$@"; do
		if [ "${l%% *}" = "$tag" ]; then
			printf '%s' "${l#* }"
			return
		fi
	done
	l=$(grep -m1 -o 'curl: ([0-9]*) .*' "$KIT_TMP/stderr" 2>/dev/null)
	local n=${l#curl: (}
	n=${n%%)*}
	printf '000 %s 0 %s' "${n:-1}" "${l#*) }"
}

# CTL: a control request's options as a transfer of the curl under test
# (a POST of {} with its own bound, its answer discarded).
CTL=(-s -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary '{}' --max-time 30 -w "$WC")

# run_scenario SCENARIO_JSON: runs one scenario and prints its report.
run_scenario() {
	local sc=$1 name steps url ok opts=() req=() line1="" line2 start end retries
	name=$(jq -r .name <<<"$sc")
	steps=$(jq -r .steps <<<"$sc")
	url=$(jq -r .url <<<"$sc")
	ok=$(jq -r .ok_url <<<"$sc")
	local o
	o=$(curl_options "$sc")
	if [[ $o == NOT_CONFIGURABLE:* ]]; then
		jq -nc --arg n "$name" --arg w "${o#NOT_CONFIGURABLE: }" '{scenario: $n, not_configurable: $w, elapsed_ms: 0}'
		return
	fi
	local notes
	notes=$(grep '^NOTE: ' <<<"$o" | sed 's/^NOTE: //' | paste -sd';' -)
	o=$(grep -v '^NOTE: ' <<<"$o")
	[ -n "$o" ] && mapfile -t opts <<<"$o"
	[ "$(jq -r .proto <<<"$sc")" = h2 ] && opts+=(--http2)
	opts+=(--cacert "$CONNAUDIT_CA" --no-progress-meter)
	# The faulted request.
	req=(-X "$(jq -r .request.method <<<"$sc")")
	while IFS= read -r h; do [ -n "$h" ] && req+=(-H "$h"); done < <(jq -r '.request.headers | to_entries[] | "\(.key): \(.value)"' <<<"$sc")
	local body
	body=$(jq -r .request.body <<<"$sc")
	[ -n "$body" ] && req+=(-H 'Content-Type: application/json' --data-binary "$body")
	local err="$KIT_TMP/stderr" body="$KIT_TMP/body"
	: >"$err"
	start=$(date +%s%N)
	case "$steps" in
	request)
		# The body goes to a file curl can truncate: a retry after part
		# of a body starts the file anew (into /dev/null curl cannot,
		# and gives up).
		mapfile -t lines < <(curl "${opts[@]}" "${req[@]}" -o "$body" -w "$W" "$url" \
			--next "${opts[@]}" -o "$body.ok" -w "$WK" "$ok" 2>"$err")
		line1=$(pick F "${lines[@]}")
		line2=$(pick K "${lines[@]}")
		;;
	warm-then-request | warm-close-then-request)
		# The warm-ups (warm_requests GETs of warm_url), the close
		# (warm-close-then-request), the request, the settle (when the
		# scenario has one) and /ok in one invocation: one connection
		# cache.
		local warm=() after=() wurl wn k close settle
		wurl=$(jq -r '.warm_url // .url' <<<"$sc")
		wn=$(jq -r '[.warm_requests // 1, 1] | max' <<<"$sc")
		for ((k = 0; k < wn; k++)); do
			warm+=("${opts[@]}" -o "$body.warm" -w "$WN" "$wurl" --next)
		done
		close=$(jq -r '.close_url // ""' <<<"$sc")
		[ "$steps" = warm-close-then-request ] && warm+=("${CTL[@]}" "$close" --next)
		settle=$(jq -r '.settle_url // ""' <<<"$sc")
		[ -n "$settle" ] && after+=(--next "${CTL[@]}" "$settle")
		mapfile -t lines < <(curl "${warm[@]}" "${opts[@]}" "${req[@]}" -o "$body" -w "$W" "$url" "${after[@]}" \
			--next "${opts[@]}" -o "$body.ok" -w "$WK" "$ok" 2>"$err")
		# A warm-up that failed is the outcome: the request was not the
		# call that failed.
		local wl c e tm m
		for wl in "${lines[@]}"; do
			if [ "${wl%% *}" = N ]; then
				read -r c e tm m <<<"${wl#N }"
				if [ "$e" != 0 ]; then
					line1="$c $e $tm warm-up: $m"
					break
				fi
			fi
		done
		[ -z "${line1:-}" ] && line1=$(pick F "${lines[@]}")
		line2=$(pick K "${lines[@]}")
		;;
	read-then-close)
		local n
		n=$(jq -r .read_bytes <<<"$sc")
		line1=$(pick F "$(curl "${opts[@]}" "${req[@]}" -w "$W" -o >(head -c "$n" >/dev/null) "$url" 2>"$err")")
		line2=$(pick K "$(curl "${opts[@]}" -o "$body.ok" -w "$WK" "$ok" 2>/dev/null)")
		;;
	cancel-when-entered)
		curl "${opts[@]}" "${req[@]}" -o "$body" -w "$W" "$url" >"$KIT_TMP/out" 2>"$err" &
		local pid=$!
		ctl GET "$(jq -r .entered_url <<<"$sc")" >/dev/null
		# SIGTERM: a background job of a script ignores SIGINT.
		kill -TERM "$pid" 2>/dev/null
		wait "$pid"
		local t
		t=$(awk -v s="$start" -v e="$(date +%s%N)" 'BEGIN{print (e-s)/1e9}')
		line1="000 143 $t terminated by the kit"
		line2=$(pick K "$(curl "${opts[@]}" -o "$body.ok" -w "$WK" "$ok" 2>/dev/null)")
		;;
	*)
		jq -nc --arg n "$name" --arg s "$steps" '{scenario: $n, skipped: ("steps " + $s + " unknown to the curl kit"), elapsed_ms: 0}'
		return
		;;
	esac
	end=$(date +%s%N)
	retries=$(grep -c 'Will retry in' "$err" 2>/dev/null)
	local outcome okj
	local wall other
	wall=$(awk -v s="$start" -v e="$end" 'BEGIN{print (e-s)/1e6}')
	# The other transfers' time: /ok's, the warm-ups' and the control
	# requests' (-w's time_total of each).
	other=$(awk '{print $3 * 1000}' <<<"${line2:-0 0 0}")
	if [ "$steps" = warm-then-request ] || [ "$steps" = warm-close-then-request ]; then
		other=$(printf '%s\n' "${lines[@]}" | awk -v k="$other" '$1 == "N" || $1 == "C" {k += $4 * 1000} END {print k}')
	fi
	if [ "$steps" = cancel-when-entered ]; then
		outcome=$(jq -nc --argjson t "$(awk -v s="$start" -v e="$end" 'BEGIN{print (e-s)/1e6}')" \
			'{error: {kind: "canceled", message: "curl terminated (SIGTERM) by the kit"}, elapsed_ms: $t}')
	else
		# The faulted call's time: the invocation's less /ok's (-w's
		# time_total is the last attempt's alone).
		outcome=$(outcome_json "$line1" | jq -c --argjson w "$wall" --argjson k "$other" '.elapsed_ms = ([$w - $k, 0] | max)')
	fi
	okj=$(outcome_json "$line2")
	jq -nc --arg n "$name" --argjson o "$outcome" --argjson k "$okj" --argjson a "$((retries + 1))" \
		--arg c "curl ${opts[*]}${notes:+; $notes}" \
		'{scenario: $n, outcome: ($o | del(.elapsed_ms)), elapsed_ms: $o.elapsed_ms, attempts: $a, ok: $k, config: $c}'
}

kit_run() {
	local name=$1 version=$2 config=$3 protocols=${4:-'["http1","h2"]'} idle=${5:-null} terms=null opened scenarios n i sc rep done_json
	if [ -n "${6:-}" ]; then
		terms=$(jq -c . "$6") || { echo "kit: $6 is not JSON" >&2; exit 2; }
	fi
	opened=$(ctl POST "$CONNAUDIT_URL/v1/sessions" "$(jq -nc --arg n "$name" --arg v "$version" --arg c "$config" \
		--argjson p "$protocols" --arg r "${CONNAUDIT_RUN:-}" --arg s "${CONNAUDIT_SKIP:-}" --argjson i "$idle" \
		--argjson t "$terms" \
		'{protocol: "connaudit.serve/v1", kit: "curl", client: ({name: $n, version: $v, config: $c} +
			(if $i == null then {} else {idle_timeout_ms: $i} end) + (if $t == null then {} else {terms: $t} end)),
			protocols: $p, run: $r, skip: $s}')") || exit 1
	scenarios=$(ctl GET "$(jq -r .scenarios_url <<<"$opened")") || exit 1
	n=$(jq '.scenarios | length' <<<"$scenarios")
	for ((i = 0; i < n; i++)); do
		sc=$(jq -c ".scenarios[$i]" <<<"$scenarios")
		rep=$(run_scenario "$sc")
		ctl POST "$(jq -r .report_url <<<"$opened")" "$rep" >/dev/null || exit 1
	done
	done_json=$(ctl POST "$(jq -r .done_url <<<"$opened")" '{}') || exit 1
	jq -r --arg n "$name" '"connaudit kit: \($n): \(.passed) passed, \(.failed) failed, \(.not_configurable) not configurable"' <<<"$done_json"
	[ "$(jq -r .ok <<<"$done_json")" = true ]
}
