#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) for a fixed number of executions,
# starting from real packets, lists and configs (fuzz/seeds.py). Fails on a
# crash, an input that takes over 10 s (a hang), or one that makes the
# process allocate over 1 GiB in total or 256 MiB at once (unbounded allocation).
# Built with debug assertions and overflow checks (fuzz/Cargo.toml's release
# profile, and -a): an arithmetic overflow is a crash here, where the
# gateway's own release build would wrap silently and answer wrong.
# Installs cargo-fuzz if missing. Needs a nightly toolchain if one is
# installed; otherwise stable with RUSTC_BOOTSTRAP=1 (the -Z flags cargo-fuzz uses).
#   scripts/fuzz.sh [RUNS]        (default 200000 per target; CI runs 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200000}
command -v cargo-fuzz >/dev/null || cargo install --locked --quiet cargo-fuzz
if rustup toolchain list | grep -q '^nightly'; then
    tc=(+nightly)
else
    tc=()
    export RUSTC_BOOTSTRAP=1
fi
python3 fuzz/seeds.py
for t in query upstream_reply list uci leases schedule hpack http2 http1 edns_client control metrics_request dnssec_records; do
    # Inputs that the run finds go to a scratch directory; the seeds stay as they are.
    new=$(mktemp -d)
    echo "== $t: $runs runs"
    status=0
    cargo "${tc[@]}" fuzz run --debug-assertions --sanitizer none "$t" "$new" "fuzz/corpus/$t" -- \
        -runs="$runs" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256 -max_len=4096 \
        -print_final_stats=1 > "$new.log" 2>&1 || status=$?
    grep -E "^INFO: seed corpus|DONE +cov|^Done|^stat::(number_of_executed_units|peak_rss_mb)|panicked|ERROR|SUMMARY|Test unit written" "$new.log" || true
    [ "$status" -eq 0 ] || tail -40 "$new.log"
    rm -f "$new.log"
    rm -rf "$new"
    [ "$status" -eq 0 ] || { echo "fuzz target $t failed (artifacts in fuzz/artifacts/$t)"; exit 1; }
done
echo "fuzz: every target ran $runs executions without a crash, hang or oversized allocation"
