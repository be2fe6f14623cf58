#!/usr/bin/env bash
# kits/java: builds the Java kit and runs its tests with Maven on JDK 17 — the truth of WebClient
# on Reactor Netty and RestClient on the JDK HttpClient against a raw-socket server, pinned in
# JUnit — then, when this tree's connaudit has `serve`, runs the kit under it: the source's
# configuration (WebClient must pass every scenario) and each mutation of it (it must fail the
# contract it breaks). Maven's local repository is ~/.m2/repository, reused between runs on one
# machine; a clean machine downloads about 30 MB into it (see kits/java/README.md).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)

if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "kits/java: mvn and a JDK 17 are needed, and installing them needs root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends maven openjdk-17-jdk-headless
fi
javac -version 2>&1 | grep -q '^javac 17' || {
	echo "kits/java: javac 17 is needed on PATH (found: $(javac -version 2>&1))" >&2
	exit 1
}

# summary: the closing line of the Surefire reports, which mvn -q does not print, on a line of its
# own (Debian's mvn ends its output with colour resets and no newline).
summary() {
	echo
	python3 - <<'EOF'
import glob, xml.etree.ElementTree as ET
t = f = s = 0
for p in glob.glob("target/surefire-reports/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests")); f += int(r.get("failures")) + int(r.get("errors")); s += int(r.get("skipped"))
print(f"kits/java: {t - f - s} passed, {f} failed, {s} skipped")
EOF
}

echo "== kits/java: mvn test (JDK 17, Spring Boot 3.5.7 BOM)"
set +e
mvn -q -B test
rc=$?
set -e
summary
[ "$rc" -eq 0 ] || { echo "kits/java: mvn test failed ($rc)" >&2; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# CONNAUDIT names another connaudit command to run the kit under; by default this tree's is built.
if [ -n "${CONNAUDIT:-}" ]; then
	cp "$CONNAUDIT" "$bin/connaudit"
else
	(cd "$root" && go build -o "$bin/connaudit" ./cmd/connaudit)
fi
if ! "$bin/connaudit" serve -h >/dev/null 2>&1; then
	echo "== kits/java: this tree's connaudit has no serve command: the kit's run under it is skipped"
	exit 0
fi

# serve_run NAME MUTATIONS [SERVE FLAGS…]: the kit under connaudit serve, its output in $bin/NAME.
serve_run() {
	local name=$1 mutations=$2
	shift 2
	set +e
	"$bin/connaudit" serve "$@" -- mvn -q -B test -Dtest=ServeTest -Dsurefire.failIfNoSpecifiedTests=false \
		"-Dconnaudit.mutations=$mutations" >"$bin/$name" 2>&1
	local rc=$?
	set -e
	echo "$rc"
}

# kit_line NAME CLIENT: the kit's own line for a client's session (its counts as the server gave them).
kit_line() {
	sed 's/\x1b\[[0-9;]*m//g' "$bin/$1" | grep -E "^kit: $2 " || { cat "$bin/$1"; echo "kits/java: no session of $2 in $1" >&2; exit 1; }
}

echo "== kits/java: the source's configuration under connaudit serve"
rc=$(serve_run source "")
cat "$bin/source"
kit_line source webclient | grep -q ': [0-9]* passed, 0 failed, 0 not configurable, 0 not reported$' || {
	echo "kits/java: WebClient as the source configures it must pass every scenario" >&2
	exit 1
}
kit_line source restclient >/dev/null
# 1: the JDK HttpClient's own replays fail close-before-response and reset (true verdicts).
[ "$rc" -le 1 ] || { echo "kits/java: connaudit serve exited $rc" >&2; exit 1; }

# mutation NAME MUTATION RUN TEXT: the mutated kit must fail the scenario RUN selects, saying TEXT.
mutation() {
	local rc
	rc=$(serve_run "$1" "$2" -run "$3")
	kit_line "$1" webclient >/dev/null
	if [ "$rc" -ne 1 ] || ! grep -qF "$4" "$bin/$1"; then
		cat "$bin/$1"
		echo "kits/java: mutation $2 did not fail with \"$4\" (exit $rc)" >&2
		exit 1
	fi
	echo "kits/java: mutation $2 fails: $(grep -F "$4" "$bin/$1" | head -1 | sed 's/^ *- //')"
}

echo "== kits/java: mutations under connaudit serve"
mutation retry500 RETRY_500 '^retry/500$' 'A5: 500 was retried: 3 requests, contract 1'
mutation totalfirst TOTAL_BEFORE_RETRY '^retry/total-budget$' 'A8: 503 was retried past the budget: 3 requests, contract 2'
# Dropping disableRetry(true) changes nothing a server can see (kits/java HiddenRetryTest).
rc=$(serve_run hidden KEEP_HIDDEN_RETRY -run 'hidden-retry|^reset$|^close-before-response$')
kit_line hidden webclient | grep -q ': [0-9]* passed, 0 failed' || {
	cat "$bin/hidden"
	echo "kits/java: with disableRetry(false) WebClient's verdicts changed" >&2
	exit 1
}
echo "kits/java: mutation KEEP_HIDDEN_RETRY: $(kit_line hidden webclient) (Reactor Netty 1.2 never replays a request it wrote)"
