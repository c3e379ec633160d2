#!/usr/bin/env bash
# Soak: the static release binary under a realistic mix at a fixed rate
# (UDP blocked/cached/misses, TCP, malformed packets) for a set time, query
# log on, a list download and swap half-way, RSS sampled every second. Fails
# unless the server's own counters account for every query sent, nothing
# failed, every log entry is written or counted and RSS stays bounded.
# Writes docs/soak.md (--quick: two minutes, proves the harness, writes nothing).
# --wan-outage MIN stops the upstream for MIN minutes after the first and
# checks that cached names keep resolving (serve-stale) and recover after.
#   bench/soak.sh [--quick] [--minutes N] [--qps N] [--tcp-qps N] [--junk-qps N] [--wan-outage MIN]
#   (default 10 minutes at 5,000 UDP QPS)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own (bench/*.sh)
. bench/lib.sh
need dnsperf:dnsperf taskset:util-linux
release_binary
cargo build --release --locked --quiet --example synth-list --example bench-upstream
out=(--out docs/soak.md)
if [ "${1:-}" = "--quick" ]; then
    shift
    out=(--minutes 2)
fi
exec python3 bench/soak.py --bin target/release --hydradns "$HYDRADNS_BIN" "${out[@]}" "$@"
