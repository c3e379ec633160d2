#!/usr/bin/env bash
# The redline benchmark: HydraDNS beside dnsmasq, Unbound and an echo
# responder, each driven to saturation by dnsperf. Installs what it needs from
# Debian, builds the release binary and the benchmark's helpers, generates its
# data deterministically, prints a markdown table and writes it, with the
# machine and the date, to docs/benchmarks.md (--quick: a short pass on the
# 100k list that proves the script works; it writes nothing, judges nothing).
#   bench/run.sh [--quick]          (full run: about 25 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for tool in dnsperf:dnsperf dnsmasq:dnsmasq-base unbound:unbound taskset:util-linux; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The binary measured is the one routers run: static musl (its allocator,
# not glibc's, sets the memory figures). HYDRADNS_BIN picks another build.
if [ -z "${HYDRADNS_BIN:-}" ]; then
    scripts/build-release.sh x86_64-unknown-linux-musl >/dev/null
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
    HYDRADNS_BIN=dist/hydradns-$version-x86_64-unknown-linux-musl
fi
cargo build --release --locked --quiet --example synth-list --example list-export \
    --example echo-responder --example bench-upstream
out=docs/benchmarks.md
[ "${1:-}" = "--quick" ] && out=
exec python3 bench/redline.py --bin target/release --hydradns "$HYDRADNS_BIN" ${out:+--out "$out"} "$@"
