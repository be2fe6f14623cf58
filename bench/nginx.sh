# nginx.sh: starting and stopping a local nginx for the bench scripts.
# Source it; it defines three functions and the variables nginx_pid, url
# and tmp.
# Needs nginx and curl.

nginx_pid=""
url=""
tmp=""

# start_nginx DIR starts nginx on a free loopback port with a temporary
# configuration in DIR: one worker, no access log, keep-alive without a
# request limit, 200 "ok" on every path. It sets nginx_pid and url, and
# exits the calling script with status 1 when nginx does not answer within
# 5 seconds.
start_nginx() {
	local dir=$1 bin port user=""
	bin=$(command -v nginx || echo /usr/sbin/nginx)
	# A free port: bind to port 0, read what the kernel chose, release it.
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	if [[ $(id -u) == 0 ]]; then
		user="user root;"
	fi
	mkdir -p "$dir"
	cat >"$dir/nginx.conf" <<CONF
$user
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
	access_log off;
	keepalive_requests 100000000;
	keepalive_timeout 60s;
	client_body_temp_path $dir/client_body;
	proxy_temp_path $dir/proxy;
	fastcgi_temp_path $dir/fastcgi;
	uwsgi_temp_path $dir/uwsgi;
	scgi_temp_path $dir/scgi;
	server {
		listen 127.0.0.1:$port;
		location / { return 200 "ok"; }
	}
}
CONF
	"$bin" -p "$dir" -c "$dir/nginx.conf" -e stderr 2>"$dir/err" &
	nginx_pid=$!
	url="http://127.0.0.1:$port/"
	for _ in $(seq 100); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	echo "$(basename "$0"): nginx did not start:" >&2
	cat "$dir/err" >&2
	exit 1
}

# stop_nginx stops the nginx start_nginx started, if any.
stop_nginx() {
	if [[ -n $nginx_pid ]]; then
		kill "$nginx_pid" 2>/dev/null || true
		wait "$nginx_pid" 2>/dev/null || true
		nginx_pid=""
	fi
}

# nginx_bench ROOT readies a bench script run against nginx: a temporary
# directory in tmp, the command built from the module at ROOT into
# $tmp/connaudit, nginx started (url set); nginx stopped and the directory
# removed when the script exits.
nginx_bench() {
	tmp=$(mktemp -d)
	trap 'stop_nginx; rm -rf "$tmp"' EXIT
	(cd "$1" && go build -o "$tmp/connaudit" ./cmd/connaudit)
	start_nginx "$tmp/nginx"
}
