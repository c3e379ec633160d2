#!/usr/bin/env bash
# Proves the repository tests itself: clones HEAD (committed work only) into
# a temporary directory with nothing beside it, so no ../shared, and runs the
# fast suites there: format check, every unit and integration test (cargo
# test), the LuCI views. A test that still reads a file from outside the
# clone fails here. The system packages are the ones scripts/test.sh already
# installed. Prints the stage's seconds. scripts/test.sh calls it with
# --under-load: the tests run while every core is kept busy (scripts/busy.sh).
#   scripts/test-clone.sh [--under-load]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/busy.sh
. scripts/busy.sh
load=()
case "${1:-}" in
    '') ;;
    --under-load) load=(under_load) ;;
    *) echo "usage: $0 [--under-load]" >&2; exit 2 ;;
esac
trap stop_busy EXIT
started=$SECONDS
tmp=$(mktemp -d)
trap 'stop_busy; rm -rf "$tmp"' EXIT
git clone -q --no-hardlinks . "$tmp/hydradns"
cd "$tmp/hydradns"
[ ! -e ../shared ] || { echo "scripts/test-clone.sh: $tmp/shared exists" >&2; exit 1; }
# Its own target directory: nothing built or decompressed by the first pass
# is reused. Registry crates come from cargo's cache, as on any machine
# that has fetched them once.
cargo fmt --all -- --check
# Built first: the load is on the tests, not on the compiler.
cargo test --locked --no-run -q
"${load[@]}" cargo test --locked -q
node --test tests/luci/ > "$tmp/node.log" 2>&1 || { cat "$tmp/node.log"; exit 1; }
printf '== fresh clone without ../shared (fmt, cargo test%s, LuCI views): %d s\n' "${load:+ under load}" $((SECONDS - started))
