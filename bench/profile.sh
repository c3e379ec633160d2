#!/usr/bin/env bash
# Where HydraDNS's time goes, by function: perf under the redline benchmark's
# saturating load, or over the start-up (--startup). Builds the static musl
# binary with symbols (profile `profiling`: release code, line tables).
#   bench/profile.sh [--list 100k|1m] [--scenario blocked|hits|mix] [--secs N] [--startup | --syscalls]
#                    [--graph SYMBOL | --annotate SYMBOL | --children] [--echo | --fwd]
#                    [--qps N [--unpinned]]   (a router's fixed rate from dnsperf instead of saturation)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own (bench/*.sh)
. bench/lib.sh
need dnsperf:dnsperf taskset:util-linux perf:linux-perf
command -v cargo-zigbuild >/dev/null || pip install --quiet ziglang cargo-zigbuild
cargo zigbuild --quiet --locked --profile profiling --target x86_64-unknown-linux-musl
cargo build --release --locked --quiet --example synth-list --example bench-upstream --example bench-load \
    --example echo-responder --example forward-echo
python3 bench/profile.py --bin target/release --hydradns target/x86_64-unknown-linux-musl/profiling/hydradns "$@"
