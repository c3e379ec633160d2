#!/usr/bin/env bash
# The redline benchmark: HydraDNS beside dnsmasq, Unbound and an echo
# responder (in the mix also a forwarding echo), each driven to saturation by
# examples/bench-load.rs and measured at a fixed rate by dnsperf. Installs what it needs from
# Debian, builds the release binary and the benchmark's helpers, generates its
# data deterministically, prints a markdown table and writes it, with the
# machine and the date, to docs/benchmarks.md (--quick: a short pass on the
# 100k list that proves the script works; it writes nothing, and judges only
# instructions per query, against bench/baseline.json).
# Then bench/lowrate.py adds the idle and low-rate table (bench/lowrate.py
# alone rewrites just that section), and bench/instructions.py adds instructions per query counted by
# callgrind, which a noisy machine moves far less than the rates (a few per cent).
#   bench/run.sh [--quick]          (full run: about 30 minutes on the 2-core dev VM)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own (bench/*.sh)
. bench/lib.sh
need dnsperf:dnsperf dnsmasq:dnsmasq-base unbound:unbound taskset:util-linux valgrind:valgrind
# HYDRADNS_BIN picks another build than the static musl one.
release_binary
cargo build --release --locked --quiet --example synth-list --example list-export \
    --example echo-responder --example forward-echo --example bench-upstream --example bench-load
out=docs/benchmarks.md
[ "${1:-}" = "--quick" ] && out=
python3 bench/redline.py --bin target/release --hydradns "$HYDRADNS_BIN" ${out:+--out "$out"} "$@"
# A router's real load beside the redline: idle, 100 and 1,000 QPS.
if [ -n "$out" ]; then
    python3 bench/lowrate.py --bin target/release --hydradns "$HYDRADNS_BIN" --out "$out"
    # Each script replaces only its own marked section of the file.
    python3 bench/instructions.py --bin target/release --hydradns "$HYDRADNS_BIN" | tee /dev/stderr |
        python3 bench/section.py "$out" instructions bench/instructions.py
else
    python3 bench/lowrate.py --bin target/release --hydradns "$HYDRADNS_BIN" --quick
    # The speed ratchet: fails when a scenario costs more than 3 % over
    # bench/baseline.json (docs/benchmarks.md, "The speed ratchet").
    python3 bench/instructions.py --bin target/release --hydradns "$HYDRADNS_BIN" --quick --baseline bench/baseline.json
fi
