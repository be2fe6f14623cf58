#!/usr/bin/env bash
# kits/java: builds the Java kit and runs its tests with Maven on JDK 17 — the truth of WebClient
# on Reactor Netty and RestClient on the JDK HttpClient against a raw-socket server, pinned in
# JUnit — then runs the kit under this tree's connaudit serve with the source's configuration:
# WebClient must pass every scenario, RestClient fail only where the JDK replays by itself.
# Maven's local repository is ~/.m2/repository, reused between runs on one machine; a clean
# machine downloads about 32 MB into it (see kits/java/README.md).
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

# The source's configuration under connaudit serve, the command docs/serve.md documents; the
# verdicts also as JUnit XML, to check them by scenario. The mutations run under serve in
# go test ./serve (TestJavaMutations), which .ci/run runs next, with the table of every kit
# (TestTable).
echo "== kits/java: the source's configuration under connaudit serve"
set +e
"$bin/connaudit" serve -junit "$bin/serve.xml" -- mvn -q -B test -Dtest=ServeTest -Dsurefire.failIfNoSpecifiedTests=false \
	>"$bin/source" 2>&1
rc=$?
set -e
sed 's/\x1b\[[0-9;]*m//g' "$bin/source"
# 1: RestClient's true failures below; anything else is the kit's or the server's.
[ "$rc" -le 1 ] || { echo "kits/java: connaudit serve exited $rc" >&2; exit 1; }
# WebClient as the source configures it passes every scenario; RestClient fails exactly where the
# JDK HttpClient sends a GET again by itself (a connection lost before any byte of the response).
python3 - "$bin/serve.xml" <<'EOF2'
import sys, xml.etree.ElementTree as ET
want = {"webclient": set(), "restclient": {"close-before-response", "reset", "retry/fresh-connection-closed"}}
got = {}
for suite in ET.parse(sys.argv[1]).getroot():
    client = suite.get("name").split()[2]
    cases = suite.findall("testcase")
    got[client] = {c.get("name") for c in cases if c.find("failure") is not None}
    print(f"kits/java: {client}: {len(cases)} scenarios, failed: {', '.join(sorted(got[client])) or 'none'}")
if got != want:
    sys.exit(f"kits/java: failed scenarios {got}, want {want}")
EOF2
