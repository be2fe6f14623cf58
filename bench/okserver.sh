# okserver.sh: starting and stopping cmd/okserver, for the bench scripts.
# Source it; it defines two functions and the variables srv and url.

srv=""
url=""

# start_okserver BIN URLFILE MAXTIME starts okserver BIN on a free loopback
# port in the background (it exits by itself after MAXTIME), sets srv to its
# pid and url to the URL it writes to URLFILE, and exits the calling script
# with status 1 when no URL comes within 5 seconds.
start_okserver() {
	"$1" -addr 127.0.0.1:0 -max-time "$3" >"$2" &
	srv=$!
	for _ in $(seq 100); do
		url=$(head -n 1 "$2" 2>/dev/null || true)
		[[ -n $url ]] && return 0
		sleep 0.05
	done
	echo "$(basename "$0"): okserver did not start" >&2
	exit 1
}

# stop_okserver stops the okserver start_okserver started, if any.
stop_okserver() {
	if [[ -n $srv ]]; then
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
		srv=""
	fi
}
