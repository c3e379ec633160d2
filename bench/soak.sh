#!/usr/bin/env bash
# Soak: the static release binary under a realistic mix at a fixed rate
# (UDP blocked/cached/misses, TCP, malformed packets) for a set time, query
# log on, a list download and swap half-way, RSS sampled every second. Fails
# unless the server's own counters account for every query sent, nothing
# failed, every log entry is written or counted and RSS stays bounded.
# Writes docs/soak.md (--quick: two minutes, proves the harness, writes nothing).
#   bench/soak.sh [--quick] [--minutes N] [--qps N] [--tcp-qps N] [--junk-qps N]
#   (default 10 minutes at 5,000 UDP QPS)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for tool in dnsperf:dnsperf taskset:util-linux; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -z "${HYDRADNS_BIN:-}" ]; then
    scripts/build-release.sh x86_64-unknown-linux-musl >/dev/null
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
    HYDRADNS_BIN=dist/hydradns-$version-x86_64-unknown-linux-musl
fi
cargo build --release --locked --quiet --example synth-list --example bench-upstream
out=(--out docs/soak.md)
if [ "${1:-}" = "--quick" ]; then
    shift
    out=(--minutes 2)
fi
exec python3 bench/soak.py --bin target/release --hydradns "$HYDRADNS_BIN" "${out[@]}" "$@"
