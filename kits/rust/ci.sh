#!/usr/bin/env bash
# kits/rust: builds the Rust kit (reqwest on hyper, pinned by Cargo.lock) and runs its tests — the
# truth of reqwest and reqwest-retry against raw-socket servers, the kit's own checks — then runs
# both examples under this tree's connaudit serve. go test ./serve (TestTable) runs the binary built
# here again for the table in docs/serve.md. Cargo's registry cache (~/.cargo/registry) is reused
# between runs on one machine; a clean machine downloads the crates Cargo.lock names.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

command -v cargo >/dev/null 2>&1 || {
	echo "kits/rust: cargo is needed (rustup's stable toolchain)" >&2
	exit 1
}

echo "== kits/rust: cargo build --release --locked"
start=$(date +%s)
cargo build --release --locked -q
echo "kits/rust: built in $(($(date +%s) - start)) s"

echo "== kits/rust: cargo test --release --locked"
cargo test --release --locked -q 2>&1 | grep -E '^(test result|failures|---- )' || true
cargo test --release --locked -q >/dev/null 2>&1 || { echo "kits/rust: cargo test failed" >&2; cargo test --release --locked 2>&1 | tail -40; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
if [ -n "${CONNAUDIT:-}" ]; then
	cp "$CONNAUDIT" "$bin/connaudit"
else
	(cd "$root" && go build -o "$bin/connaudit" ./cmd/connaudit)
fi

# Each example under connaudit serve: 1 is a failed verdict, as docs/serve.md's table says (go test
# ./serve checks that table); anything else is a failure of the kit or the server.
for client in reqwest reqwest-retry; do
	echo "== kits/rust: $client under connaudit serve"
	set +e
	"$bin/connaudit" serve -- "$PWD/target/release/connaudit-kit-rust" "$client" >"$bin/$client.out" 2>&1
	rc=$?
	set -e
	grep -E '^connaudit kit: ' "$bin/$client.out" || true
	if [ "$rc" -gt 1 ] || ! grep -q "^connaudit kit: $client: " "$bin/$client.out"; then
		cat "$bin/$client.out"
		echo "kits/rust: $client: connaudit serve exited $rc" >&2
		exit 1
	fi
done
